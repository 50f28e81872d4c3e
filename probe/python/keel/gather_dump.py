"""One whole checkpoint from a sharded job's dumps (FSDP2's fully_shard, tensor parallelism).

Under sharding each rank dumps its own shards: its ``model.pt`` and ``optimizer.pt`` hold
DTensors whose data is that rank's part alone, and loading them needs the same sharding again.
To look at the poisoned step on one machine, or to load the weights into an unsharded copy of
the model, the ranks' dumps of the same step are put back together here into plain tensors::

    python -m keel.gather_dump keel-dumps/step-300-nonfinite-rank0
    # -> keel-dumps/step-300-nonfinite-gathered/{model.pt,optimizer.pt,manifest.json}

Given one rank's dump folder (``...-rank<R>``), the other ranks' are its siblings of the same
name; several folders may be given instead. Each DTensor is assembled from every rank's local
part, placed by its mesh coordinate as DTensor shards (``Shard(d)``: torch.chunk's split of
dimension d; ``Replicate``: any one copy). Every element must come from some rank's dump, or
nothing is written and the missing part is named. A value that is not a DTensor (a buffer,
an optimizer's step count, the param groups) is the lowest rank's; a plain tensor that
differs between ranks is a shard that cannot be placed (FSDP1's), and is refused by name.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import torch

_RANK_SUFFIX = re.compile(r"^(?P<prefix>.+)-rank(?P<rank>\d+)$")
_STATE_FILES = ("model.pt", "optimizer.pt")


class GatherError(ValueError):
    """The dumps cannot be put together: which ones, and why."""


def shard_extent(size: int, chunks: int, index: int) -> Tuple[int, int]:
    """(length, offset) of chunk ``index`` of ``chunks`` of a dimension of ``size``, as
    torch.chunk splits it and DTensor's Shard places it: chunks of ceil(size / chunks), the
    last ones shorter or empty."""
    full = -(-size // chunks)
    start = min(full * index, size)
    return min(size, start + full) - start, start


def rank_dumps(folders: Sequence[Path]) -> List[Path]:
    """The dump folders to gather: the given ones, or, for a single ``...-rank<R>`` folder,
    every sibling of the same name whatever its rank."""
    for folder in folders:
        if not folder.is_dir():
            raise GatherError(f"{folder}: no such folder")
    if len(folders) != 1:
        return list(folders)
    match = _RANK_SUFFIX.match(folders[0].name)
    if match is None:
        return list(folders)
    prefix = match.group("prefix")
    siblings = [p for p in folders[0].parent.iterdir()
                if p.is_dir() and (m := _RANK_SUFFIX.match(p.name)) and m.group("prefix") == prefix]
    return sorted(siblings, key=lambda p: int(_RANK_SUFFIX.match(p.name).group("rank")))


def _manifests(folders: Sequence[Path]) -> List[Dict[str, Any]]:
    manifests = []
    for folder in folders:
        path = folder / "manifest.json"
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise GatherError(f"{folder}: not a keel dump ({path}: {error})") from None
        if not str(manifest.get("format", "")).startswith("keel-dump-"):
            raise GatherError(f"{folder}: not a keel dump (manifest format {manifest.get('format')!r})")
        manifests.append(manifest)
    first = manifests[0]
    for folder, manifest in zip(folders, manifests):
        if (manifest.get("step"), manifest.get("reason")) != (first.get("step"), first.get("reason")):
            raise GatherError(f"{folder}: step {manifest.get('step')} ({manifest.get('reason')}), but "
                              f"{folders[0]} is of step {first.get('step')} ({first.get('reason')})")
    ranks = [int(m.get("rank", -1)) for m in manifests]
    if len(set(ranks)) != len(ranks):
        raise GatherError(f"two dumps of the same rank among {[str(f) for f in folders]}: ranks {ranks}")
    return manifests


def _assemble(key: str, parts: Dict[int, Any]) -> torch.Tensor:
    """One DTensor whole from its ranks' local parts ({rank: DTensor})."""
    from torch.distributed.tensor.placement_types import Replicate, Shard

    sample = next(iter(parts.values()))
    mesh = sample.device_mesh.mesh
    whole = torch.empty(sample.shape, dtype=sample.dtype)
    covered = torch.zeros(sample.shape, dtype=torch.bool)
    for rank, part in parts.items():
        where = (mesh == rank).nonzero()
        if where.shape[0] != 1:
            raise GatherError(f"{key}: rank {rank}'s dump is not of a rank of its device mesh {mesh.tolist()}")
        coordinate = where[0].tolist()
        lengths, offsets = list(sample.shape), [0] * sample.dim()
        for mesh_dim, placement in enumerate(part.placements):
            if type(placement) is Shard:
                length, offset = shard_extent(lengths[placement.dim], mesh.shape[mesh_dim], coordinate[mesh_dim])
                lengths[placement.dim] = length
                offsets[placement.dim] += offset
            elif not isinstance(placement, Replicate):
                raise GatherError(f"{key}: a {placement} placement, which keel cannot put together "
                                  f"(Shard(d) and Replicate only)")
        local = part._local_tensor
        if list(local.shape) != lengths:
            raise GatherError(f"{key}: rank {rank}'s part is {tuple(local.shape)}, where its placements "
                              f"{part.placements} give {tuple(lengths)}")
        region = tuple(slice(o, o + n) for o, n in zip(offsets, lengths))
        whole[region] = local.detach().cpu()
        covered[region] = True
    if not bool(covered.all()):
        missing = sorted(set(mesh.flatten().tolist()) - set(parts))
        raise GatherError(f"{key}: {int((~covered).sum())} of {covered.numel()} elements are in no dump given "
                          f"(ranks {missing} missing)")
    return whole


def _same(a: torch.Tensor, b: Any) -> bool:
    """Whether two ranks' copies of a plain tensor are one value (NaN where the other has NaN:
    a NaN step's dump may hold them)."""
    if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    return a.is_floating_point() and bool(((a == b) | (a.isnan() & b.isnan())).all())


def gather_values(key: str, values: Dict[int, Any]) -> Any:
    """{rank: a value loaded from that rank's file} -> the job's whole value."""
    from torch.distributed.tensor import DTensor

    lowest = min(values)
    first = values[lowest]
    if isinstance(first, DTensor):
        return _assemble(key, values)
    if isinstance(first, torch.Tensor):
        # A plain tensor is a replica (a buffer, a step count) only if every rank holds the same:
        # one that differs is a shard keel cannot place (FSDP1's flat parameters' moments).
        for rank, value in values.items():
            if not _same(first, value):
                raise GatherError(f"{key} differs between ranks {lowest} and {rank} and is not a DTensor: "
                                  f"a shard keel cannot place (FSDP1's flat parameters and their optimizer "
                                  f"state are not DTensors; FSDP1's model.pt is already whole)")
        return first
    if isinstance(first, (dict, list, tuple)):
        for rank, value in values.items():
            if type(value) is not type(first) or (value.keys() != first.keys() if isinstance(first, dict)
                                                  else len(value) != len(first)):
                raise GatherError(f"{key or 'the file'}: rank {rank}'s entries are not rank {lowest}'s: dumps of "
                                  f"different models, or state each rank keeps of its own shard (FSDP1's "
                                  f"optimizer state), which keel cannot put together")
    if isinstance(first, dict):
        return {k: gather_values(f"{key}.{k}" if key else str(k), {r: v[k] for r, v in values.items()})
                for k in first}
    if isinstance(first, (list, tuple)) and any(isinstance(v, (DTensor, dict, list, tuple)) for v in first):
        items = [gather_values(f"{key}[{i}]", {r: v[i] for r, v in values.items()}) for i in range(len(first))]
        return type(first)(items)
    return first


def gather_dump(folders: Sequence[Path], out: Path | None = None) -> Path:
    """Writes the whole ``model.pt`` and ``optimizer.pt`` of the ranks' dumps in ``folders``
    (see the module's docstring) to ``out`` (default: ``<prefix>-gathered`` beside them) and
    returns it. Raises GatherError, naming the dump and the tensor, when they cannot be put
    together; nothing is written then."""
    import torch.distributed.tensor  # noqa: F401  (torch.load reads DTensors only with it)

    folders = rank_dumps([Path(f) for f in folders])
    if not folders:
        raise GatherError("no dump folder given")
    manifests = _manifests(folders)
    ranks = [int(m["rank"]) for m in manifests]
    if out is None:
        match = _RANK_SUFFIX.match(folders[0].name)
        out = folders[0].parent / f"{match.group('prefix') if match else folders[0].name}-gathered"
    whole: Dict[str, Any] = {}
    for name in _STATE_FILES:
        present = [(rank, folder / name) for rank, folder in zip(ranks, folders) if (folder / name).exists()]
        if not present:
            continue
        if len(present) != len(folders):
            raise GatherError(f"{name} is missing from {[str(f) for f in folders if not (f / name).exists()]}")
        whole[name] = gather_values("", {rank: torch.load(path) for rank, path in present})
    if not whole:
        raise GatherError(f"no model.pt nor optimizer.pt in {[str(f) for f in folders]}")
    out.mkdir(parents=True, exist_ok=True)
    for name, state in whole.items():
        torch.save(state, out / name)
    # The lowest rank's manifest, less what was of that rank alone (its run_id, its telemetry).
    lowest = manifests[ranks.index(min(ranks))]
    manifest = {k: v for k, v in lowest.items() if k not in ("format", "rank", "run_id", "telemetry_steps", "files")}
    manifest.update(format="keel-dump-gathered-1", ranks=sorted(ranks),
                    run_ids=[m.get("run_id") for _, m in sorted(zip(ranks, manifests), key=lambda x: x[0])],
                    gathered_from=[str(f) for f in folders], files={n: (out / n).stat().st_size for n in whole})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m keel.gather_dump",
        description="Put a sharded job's dumps of one step together into one whole checkpoint "
                    "(plain tensors that torch.load and load_state_dict read on one machine).")
    parser.add_argument("dumps", nargs="+", type=Path,
                        help="one rank's dump folder (its siblings of the other ranks are found), or every rank's")
    parser.add_argument("-o", "--out", type=Path, default=None,
                        help="the folder to write (default: <name>-gathered beside the dumps)")
    args = parser.parse_args(argv)
    try:
        out = gather_dump(args.dumps, args.out)
    except GatherError as error:
        print(f"keel.gather_dump: {error}", file=sys.stderr)
        return 1
    print(f"keel.gather_dump: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
