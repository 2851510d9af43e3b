from __future__ import annotations

from ulid import ULID

from slate_ops.compaction import CompactorOptions, propose
from slate_ops.manifest.model import CompactedSst, Manifest, SortedRun, SstInfo, SstView

OPTIONS = CompactorOptions(min_sources=4, max_sources=8, include_size_threshold=4.0)


def sst(size: int) -> CompactedSst:
    return CompactedSst(ULID(), SstInfo(b"a", b"z", size, 1, 1, 1))


def manifest(l0_count: int = 0, run_sizes: tuple[int, ...] = ()) -> Manifest:
    ssts = [sst(100) for _ in range(l0_count)]
    l0 = tuple(SstView(ULID(), s.id) for s in ssts)
    runs = []
    for i, size in enumerate(run_sizes):
        s = sst(size)
        ssts.append(s)
        runs.append(SortedRun(len(run_sizes) - i, (SstView(ULID(), s.id),)))  # newest first, ids descending
    return Manifest(ssts=tuple(ssts), l0=l0, compacted=tuple(runs))


def test_nothing_to_do_below_thresholds() -> None:
    assert propose(manifest(l0_count=3), OPTIONS) is None
    assert propose(manifest(run_sizes=(10, 10, 10)), OPTIONS) is None


def test_l0_compaction_takes_the_oldest_up_to_max_sources() -> None:
    m = manifest(l0_count=11, run_sizes=(1000,))
    proposal = propose(m, OPTIONS)
    assert proposal is not None and proposal.kind == "l0"
    assert proposal.l0_views == m.l0[-8:]
    assert proposal.destination == 2 and not proposal.drop_tombstones  # an older run exists


def test_l0_compaction_into_the_only_run_drops_tombstones() -> None:
    proposal = propose(manifest(l0_count=4), OPTIONS)
    assert proposal is not None and proposal.drop_tombstones and proposal.destination == 0


def test_similar_adjacent_runs_merge_and_dissimilar_do_not() -> None:
    proposal = propose(manifest(run_sizes=(10, 12, 15, 20, 5000)), OPTIONS)
    assert proposal is not None and proposal.kind == "sorted_runs"
    assert proposal.run_ids == (5, 4, 3, 2) and proposal.destination == 2
    assert not proposal.drop_tombstones  # run 1 is older
    assert propose(manifest(run_sizes=(10, 100, 1000, 10000)), OPTIONS) is None


def test_window_reaching_the_oldest_run_drops_tombstones() -> None:
    proposal = propose(manifest(run_sizes=(10000, 10, 12, 15, 20)), OPTIONS)
    assert proposal is not None and proposal.run_ids == (4, 3, 2, 1) and proposal.drop_tombstones


def test_full_compaction_takes_everything() -> None:
    m = manifest(l0_count=2, run_sizes=(10, 10000))
    proposal = propose(m, OPTIONS, full=True)
    assert proposal is not None and proposal.kind == "full"
    assert proposal.l0_views == m.l0 and proposal.run_ids == (2, 1) and proposal.destination == 1
    assert proposal.drop_tombstones
    assert propose(manifest(run_sizes=(10,)), OPTIONS, full=True) is None
