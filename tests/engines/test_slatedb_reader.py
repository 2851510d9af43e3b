"""Reading a SlateDB database at a checkpoint range by range (slate_ops.engines.slatedb.reader):
key ranges from the manifest's SST key ranges, and CheckpointReader scans that equal the binding's
own DbReader and write nothing."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from slate_ops.engines.slatedb import LOOP, SlateDbAdmin
from slate_ops.engines.slatedb.reader import CheckpointReader, key_ranges
from slate_ops.engines.slatedb.views import ManifestView, SortedRunView, SstView
from slate_ops.errors import SlateDbError
from slate_ops.objstore import LocalStore
from tests.support.slatedb import read_all, write_db
from tests.support.stores import snapshot


def manifest(l0: list[SstView], runs: list[list[SstView]] = ()) -> ManifestView:  # type: ignore[assignment]
    return ManifestView(
        id=1,
        writer_epoch=1,
        compactor_epoch=0,
        initialized=True,
        l0=tuple(l0),
        sorted_runs=tuple(SortedRunView(i, tuple(r), sum(s.size for s in r)) for i, r in enumerate(runs)),
        checkpoints=(),
        external_dbs=(),
        segments=0,
        next_wal_sst_id=1,
        replay_after_wal_id=0,
        last_compacted_l0_sst_view_id=None,
        last_l0_seq=0,
    )


def sst(first: bytes, last: bytes, size: int = 100) -> SstView:
    return SstView(f"v{first!r}", f"s{first!r}", first, last, size)


def covers_everything(ranges: list[tuple[bytes | None, bytes | None]]) -> bool:
    edges_meet = all(a[1] == b[0] and a[1] is not None for a, b in itertools.pairwise(ranges))
    return ranges[0][0] is None and ranges[-1][1] is None and edges_meet


def test_a_sorted_run_is_cut_at_its_ssts_edges() -> None:
    run = [sst(b"a%02d" % (10 * i), b"a%02d" % (10 * i + 9)) for i in range(8)]
    got = key_ranges(manifest([], [run]), 4)
    assert covers_everything(got) and len(got) == 4
    assert [r[0] for r in got[1:]] == [b"a20", b"a40", b"a60"]  # two SSTs of equal size per range
    assert key_ranges(manifest([], [run]), 1) == [(None, None)]
    assert len(key_ranges(manifest([], [run]), 100)) <= 2 * len(run)  # no more cuts than edges


def test_overlapping_l0_ssts_are_cut_where_their_bytes_are() -> None:
    # four L0 SSTs written over [0,250), [0,500), [0,750), [0,1000) (each revisiting older keys)
    l0 = [
        sst(b"k00020", b"k00999"),
        sst(b"k00008", b"k00749"),
        sst(b"k00014", b"k00499"),
        sst(b"k00000", b"k00249"),
    ]
    got = key_ranges(manifest(l0), 4)
    assert got == [(None, b"k00249"), (b"k00249", b"k00499"), (b"k00499", b"k00749"), (b"k00749", None)]


def test_no_ssts_or_one_key_is_one_range() -> None:
    assert key_ranges(manifest([]), 8) == [(None, None)]
    assert key_ranges(manifest([sst(b"x", b"x")]), 8) == [(None, None)]
    with pytest.raises(ValueError):
        key_ranges(manifest([]), 0)


def test_range_scans_at_a_checkpoint_equal_the_binding_reader_and_write_nothing(
    sdb: Any, tmp_path: Path
) -> None:
    expected = LOOP.run(write_db(sdb, tmp_path, "db", rounds=3, keys=200))
    store = LocalStore(tmp_path)
    admin = SlateDbAdmin("db", store)
    checkpoint, manifest_id = admin.create_checkpoint(lifetime_s=600)
    m = admin.read_manifest(manifest_id)
    assert m is not None
    before = snapshot(store)
    got: dict[bytes, bytes] = {}
    batches = 0
    with CheckpointReader("db", store, checkpoint) as reader:
        for start, end in [(None, b"k0050"), (b"k0050", b"k0150"), (b"k0150", None)]:
            for keys, values in reader.scan(start, end, rows=64):
                assert keys == sorted(keys) and all(
                    (start or b"") <= k and (end is None or k < end) for k in keys
                )
                got.update(zip(keys, values, strict=True))
                batches += 1
    assert got == expected == LOOP.run(read_all(sdb, tmp_path, "db", checkpoint))
    assert batches >= 200 // 64
    assert snapshot(store) == before  # CHECKPOINT mode: no manifest, no checkpoint written

    with pytest.raises(SlateDbError, match="SlateDB database db: open a reader at checkpoint"):
        CheckpointReader("db", store, "00000000-0000-0000-0000-000000000000")
