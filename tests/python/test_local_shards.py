"""The lending of each step's gradients to keel's leaves over sharded parameters (the extension's
LocalShards), on plain tensors standing in for an FSDP1 flat parameter and a DTensor: the
distributed tests run it under torchrun, these pin its cases one by one."""

from __future__ import annotations

import pytest
import torch

from keel import _probe


def flat_parts(flat: torch.Tensor, sizes):
    """keel's leaves over consecutive parts of ``flat``'s data, as ``_local_shards.flat_parts``
    makes them: (name, leaf, offset in the shard)."""
    parts, offset = [], 0
    for i, numel in enumerate(sizes):
        parts.append((f"part{i}", flat.detach().narrow(0, offset, numel).requires_grad_(), offset))
        offset += numel
    return parts


def test_each_part_is_lent_its_slice_of_the_flat_gradient_without_a_copy_and_gives_it_back():
    flat = torch.zeros(10, requires_grad=True)
    parts = flat_parts(flat, [4, 0, 6])   # the middle one: a parameter this rank holds none of
    shards = _probe.LocalShards({flat: parts})
    flat.grad = torch.arange(10.0)
    shards.lend_gradients()
    for _, leaf, offset in parts:
        assert torch.equal(leaf.grad, flat.grad[offset: offset + leaf.numel()])
    assert parts[2][1].grad.data_ptr() == flat.grad.data_ptr() + 4 * flat.grad.element_size()
    shards.take_gradients_back()
    assert all(leaf.grad is None for _, leaf, _ in parts)


def test_a_flat_gradient_of_another_size_than_the_shard_is_no_gradient_of_its_parts():
    # FSDP1 under no_sync keeps the whole unsharded gradient, and a parameter may have none.
    flat = torch.zeros(10, requires_grad=True)
    parts = flat_parts(flat, [4, 6])
    shards = _probe.LocalShards({flat: parts})
    shard = flat.data
    for whole in (True, False):
        flat.grad = torch.ones(10)
        shards.lend_gradients()
        if whole:
            # As FSDP1 swaps a flat parameter's data: the gradient of the unsharded parameter,
            # held while the data is the shard again.
            flat.data = torch.zeros(20)
            flat.grad = torch.ones(20)
            flat.data = shard
        else:
            flat.grad = None
        shards.lend_gradients()
        assert all(leaf.grad is None for _, leaf, _ in parts), whole


def test_a_local_parts_leaf_is_lent_its_parameters_gradient():
    param = torch.zeros(3, 2, requires_grad=True)
    leaf = param.detach().clone().requires_grad_()
    shards = _probe.LocalShards({param: leaf})
    param.grad = torch.randn(3, 2)
    shards.lend_gradients()
    assert leaf.grad is param.grad or leaf.grad.data_ptr() == param.grad.data_ptr()
    param.grad = None
    shards.lend_gradients()
    assert leaf.grad is None


def test_a_gradient_that_does_not_fit_its_leaf_is_refused_as_tensor_grad_would_refuse_it():
    param = torch.zeros(3, requires_grad=True)
    leaf = torch.zeros(2, requires_grad=True)
    shards = _probe.LocalShards({param: leaf})
    param.grad = torch.ones(3)
    with pytest.raises(ValueError, match="does not match keel's leaf"):
        shards.lend_gradients()
    assert leaf.grad is None
    double = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    double.grad = torch.ones(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="does not match keel's leaf"):
        _probe.LocalShards({double: torch.zeros(3, requires_grad=True)}).lend_gradients()


def test_a_refused_gradient_leaves_no_leaf_holding_one():
    # A flat parameter's parts are lent in order: the first fits, the second (not flat, as no
    # part keel makes is) does not, and the first's gradient is taken back.
    flat = torch.zeros(8, requires_grad=True)
    fits = flat.detach().narrow(0, 0, 4).requires_grad_()
    square = flat.detach().narrow(0, 4, 4).view(2, 2).requires_grad_()
    shards = _probe.LocalShards({flat: [("fits", fits, 0), ("square", square, 4)]})
    flat.grad = torch.ones(8)
    with pytest.raises(ValueError, match="does not match keel's leaf"):
        shards.lend_gradients()
    assert fits.grad is None and square.grad is None
