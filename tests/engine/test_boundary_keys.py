"""Point reads at SST boundaries inside a sorted run of several SSTs (issue 19, "blind spots").

A key that is exactly the first (or last) key of an SST inside a sorted run, and the keys just below and
above it, must read right through the writer, the reader and the LSM state — checked here directly,
not only by the reliability layer after ~90 s. The run is made by a real compaction with a small
``target_sst_bytes``; a hypothesis property then cuts sorted runs at random boundaries.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from ulid import ULID

from slate_ops import Db
from slate_ops.compaction import CompactorOptions
from slate_ops.engine import DbReader
from slate_ops.engine.lsm import LsmState, SstReaders
from slate_ops.layout import sst_key
from slate_ops.manifest.model import CompactedSst, Manifest, SortedRun, SstView
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.sst import encode_sst, entries_to_table
from tests.support.compaction import compact_once
from tests.support.engine import QUIET, QUIET_READER

KEYS = 400


def key(i: int) -> bytes:
    return b"k%06d" % (2 * i)  # even numbers only: every odd neighbour is absent


def below(k: bytes) -> bytes:
    return b"k%06d" % (int(k[1:]) - 1)


def above(k: bytes) -> bytes:
    return b"k%06d" % (int(k[1:]) + 1)


def value(i: int) -> bytes:
    return b"value-%d-" % i + b"x" * 40


def test_first_and_last_keys_of_every_sst_in_a_compacted_run(memory_store: MemoryStore) -> None:
    with Db.open("db", memory_store, QUIET) as db:
        for part in range(4):  # four L0 SSTs of interleaved keys
            for i in range(part, KEYS, 4):
                db.put(key(i), value(i))
            db.flush_memtable()
    compact_once("db", memory_store, CompactorOptions(target_sst_bytes=2_000))
    manifest = ManifestStore(memory_store, "db").read_latest_required().value
    assert manifest.l0 == () and len(manifest.compacted) == 1
    ssts = {s.id: s for s in manifest.ssts}
    run = [ssts[view.sst_id].info for view in manifest.compacted[0].views]
    assert len(run) >= 4, "the run should span several SSTs"
    boundaries = {info.first_key for info in run} | {info.last_key for info in run}
    probes = sorted(boundaries | {below(k) for k in boundaries} | {above(k) for k in boundaries})
    expected = {key(i): value(i) for i in range(KEYS)}

    with (
        Db.open("db", memory_store, QUIET) as db,
        DbReader.open("db", memory_store, options=QUIET_READER) as reader,
    ):
        for probe in probes:
            want = expected.get(probe)
            assert db.get(probe) == want, probe
            assert reader.get(probe) == want, probe
    assert b"k000000" in boundaries and below(b"k000000") == b"k-00001"  # the very first key is a boundary


def sorted_run_manifest(store: MemoryStore, keys: list[bytes], cuts: list[int]) -> Manifest:
    """A manifest whose only sorted run splits ``keys`` (sorted) at ``cuts`` into several SSTs."""
    bounds = [0, *sorted(set(cuts)), len(keys)]
    ssts, views = [], []
    for start, end in itertools.pairwise(bounds):
        if start == end:
            continue
        sst_id = ULID()
        rows = [(k, 1, 0, b"v" + k) for k in keys[start:end]]
        data, info = encode_sst(entries_to_table(rows))
        store.put(sst_key("db", sst_id), data)
        ssts.append(CompactedSst(sst_id, info))
        views.append(SstView(ULID(), sst_id))
    return Manifest(initialized=True, ssts=tuple(ssts), compacted=(SortedRun(0, tuple(views)),))


@settings(max_examples=40, deadline=None)
@given(
    st.sets(st.integers(1, 500), min_size=1, max_size=60).map(sorted),
    st.lists(st.integers(0, 60), max_size=12),
)
def test_any_boundaries_of_a_sorted_run_read_every_key_and_no_neighbour(
    numbers: list[int], cuts: list[int]
) -> None:
    store = MemoryStore()
    keys = [key(n) for n in numbers]
    manifest = sorted_run_manifest(store, keys, [c for c in cuts if 0 < c < len(keys)])
    lsm = LsmState(manifest, "db", SstReaders(store, None))
    present = set(keys)
    for k in keys:
        entry = lsm.get(k)
        assert entry is not None and entry[3] == b"v" + k, k
        for neighbour in (below(k), above(k)):
            if neighbour not in present:
                assert lsm.get(neighbour) is None, neighbour
