"""The shape of a database's LSM tree: L0 SSTs and sorted runs, for operators and dashboards."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from slate_ops.keytext import render_optional
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore.base import ObjectStore


@dataclass(frozen=True)
class SstSummary:
    id: str
    first_key: bytes
    last_key: bytes
    size_bytes: int
    num_entries: int


@dataclass(frozen=True)
class RunSummary:
    id: int
    ssts: int
    first_key: bytes | None
    last_key: bytes | None
    size_bytes: int
    num_entries: int


@dataclass(frozen=True)
class LsmShape:
    manifest_id: int
    l0: tuple[SstSummary, ...]  # newest first
    sorted_runs: tuple[RunSummary, ...]  # newest first


def shape_of(manifest_id: int, manifest: Manifest) -> LsmShape:
    ssts = {s.id: s for s in manifest.ssts}
    l0 = []
    for view in manifest.l0:
        info = ssts[view.sst_id].info
        l0.append(
            SstSummary(str(view.sst_id), info.first_key, info.last_key, info.size_bytes, info.num_entries)
        )
    runs = []
    for run in manifest.compacted:
        infos = [ssts[v.sst_id].info for v in run.views]
        runs.append(
            RunSummary(
                id=run.id,
                ssts=len(infos),
                first_key=infos[0].first_key if infos else None,
                last_key=infos[-1].last_key if infos else None,
                size_bytes=sum(i.size_bytes for i in infos),
                num_entries=sum(i.num_entries for i in infos),
            )
        )
    return LsmShape(manifest_id, tuple(l0), tuple(runs))


def lsm_shape(path: str, store: ObjectStore) -> LsmShape:
    current = ManifestStore(store, path).read_latest_required()
    return shape_of(current.id, current.value)


def shape_json(shape: LsmShape) -> dict[str, Any]:
    """``shape`` as JSON, keys in the text/``hex:`` convention of :mod:`slate_ops.keytext`."""
    return {
        "manifest_id": shape.manifest_id,
        "l0": [_summary(s) for s in shape.l0],
        "sorted_runs": [_summary(r) for r in shape.sorted_runs],
    }


def shape_rows(shape: LsmShape) -> list[dict[str, Any]]:
    """One row per L0 SST, then one per sorted run (newest first): the table form of a shape."""
    rows: list[dict[str, Any]] = []
    for sst in shape.l0:
        rows.append({"level": "L0", "id": sst.id, "ssts": 1, **_range(sst)})
    for run in shape.sorted_runs:
        rows.append({"level": "SR", "id": str(run.id), "ssts": run.ssts, **_range(run)})
    return rows


def _summary(summary: SstSummary | RunSummary) -> dict[str, Any]:
    return {
        **asdict(summary),
        "first_key": render_optional(summary.first_key),
        "last_key": render_optional(summary.last_key),
    }


def _range(summary: SstSummary | RunSummary) -> dict[str, Any]:
    return {
        "first_key": render_optional(summary.first_key),
        "last_key": render_optional(summary.last_key),
        "bytes": summary.size_bytes,
        "entries": summary.num_entries,
    }
