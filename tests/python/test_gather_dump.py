"""keel.gather_dump's placement of each rank's part: DTensor's Shard(d) splits a dimension as
torch.chunk does (test_distributed.py gathers a real FSDP2 job's dumps)."""

from __future__ import annotations

import json

import pytest
import torch

from keel.gather_dump import GatherError, gather_dump, rank_dumps, shard_extent


@pytest.mark.parametrize("chunks", [1, 2, 3, 4, 7])
def test_each_ranks_extent_is_torch_chunks_split(chunks):
    for size in range(0, 12):
        pieces = list(torch.arange(size).chunk(chunks))
        pieces += [torch.arange(0)] * (chunks - len(pieces))   # chunk() drops the empty tail
        for index, piece in enumerate(pieces):
            length, offset = shard_extent(size, chunks, index)
            assert length == piece.numel(), (size, chunks, index)
            if length:
                assert offset == int(piece[0]), (size, chunks, index)


def test_each_ranks_extent_is_dtensors_own_where_torch_says_it():
    from torch.distributed.tensor.placement_types import Shard

    if not hasattr(Shard, "local_shard_size_and_offset"):
        pytest.skip("this torch does not say where a shard lies")
    for size in range(0, 12):
        for chunks in (1, 2, 3, 4, 7):
            for index in range(chunks):
                assert shard_extent(size, chunks, index) == tuple(Shard.local_shard_size_and_offset(size, chunks, index))


def dump_folder(parent, name, step, rank, reason="nonfinite"):
    folder = parent / name
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"format": "keel-dump-1", "step": step, "reason": reason,
                                                       "rank": rank}))
    return folder


def test_a_plain_tensor_is_one_ranks_if_every_rank_holds_it_and_refused_if_they_differ(tmp_path):
    """A buffer (replicated) is taken as it is, NaNs and all; a plain tensor that differs
    between ranks is a shard with no placement (FSDP1's flat moments), and files whose entries
    differ are of different models: both refused, nothing written."""
    buffer = torch.tensor([1.0, float("nan"), 3.0])
    folders = [dump_folder(tmp_path, f"step-7-nonfinite-rank{r}", 7, r) for r in (0, 1)]
    for rank, folder in enumerate(folders):
        torch.save({"mask": buffer.clone(), "shard": torch.full((2,), float(rank))}, folder / "model.pt")
    with pytest.raises(GatherError, match="shard differs between ranks 0 and 1 and is not a DTensor"):
        gather_dump([folders[0]])
    assert not (tmp_path / "step-7-nonfinite-gathered").exists()
    torch.save({"mask": buffer.clone(), "other": torch.zeros(1)}, folders[1] / "model.pt")
    with pytest.raises(GatherError, match="rank 1's entries are not rank 0's"):
        gather_dump([folders[0]])
    for folder in folders:
        torch.save({"mask": buffer.clone()}, folder / "model.pt")
    out = gather_dump([folders[1]])
    assert torch.equal(torch.load(out / "model.pt")["mask"].isnan(), buffer.isnan())


def test_one_ranks_folder_finds_its_siblings_of_the_other_ranks(tmp_path):
    for rank in (2, 0, 1, 10):
        dump_folder(tmp_path, f"step-7-nonfinite-rank{rank}", 7, rank)
    dump_folder(tmp_path, "step-8-nonfinite-rank0", 8, 0)
    found = rank_dumps([tmp_path / "step-7-nonfinite-rank1"])
    assert [p.name for p in found] == [f"step-7-nonfinite-rank{r}" for r in (0, 1, 2, 10)]


def test_dumps_of_different_steps_no_dump_or_no_folder_are_refused_in_words(tmp_path):
    a = dump_folder(tmp_path, "a", 7, 0)
    b = dump_folder(tmp_path, "b", 8, 1)
    with pytest.raises(GatherError, match="step 8"):
        gather_dump([a, b])
    (tmp_path / "c").mkdir()
    with pytest.raises(GatherError, match="not a keel dump"):
        gather_dump([a, tmp_path / "c"])
    with pytest.raises(GatherError, match="same rank"):
        gather_dump([a, dump_folder(tmp_path, "d", 7, 0)])
    with pytest.raises(GatherError, match="step-7-nonfinite-rank0: no such folder"):
        gather_dump([tmp_path / "step-7-nonfinite-rank0"])
