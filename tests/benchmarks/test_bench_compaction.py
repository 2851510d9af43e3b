"""Smoke test of the compaction benchmark's harness: tiny inputs, local executor and raw limit only."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pyarrow as pa

from benchmarks import bench_compaction as bench
from slate_ops import DbReader, ReaderOptions
from slate_ops.compaction import CompactorOptions, LocalExecutor
from slate_ops.objstore import LocalStore
from slate_ops.sst import KIND_VALUE, SstReader
from tests.support.compaction import compact_once

MB_PER_SST = 0.15  # ~1,170 rows per SST


def expected_content(inputs: bench.Inputs, root: Path) -> dict[bytes, bytes]:
    """The newest version of every key across the input SSTs, tombstones removed (plain Python)."""
    store = LocalStore(root)
    newest: dict[bytes, tuple[int, int, bytes]] = {}
    for key in inputs.object_keys():
        table: pa.Table = SstReader.open(store, key).read_table()
        for k, seq, kind, value in zip(*(table.column(c).to_pylist() for c in range(4)), strict=True):
            if k not in newest or seq > newest[k][0]:
                newest[k] = (seq, kind, value)
    return {k: v for k, (_, kind, v) in newest.items() if kind == KIND_VALUE}


def test_inputs_have_the_promised_shape(tmp_path: Path) -> None:
    inputs = bench.build_inputs(tmp_path / "in", MB_PER_SST)
    assert len(inputs.ssts) == bench.SSTS and inputs.rows == bench.SSTS * int(MB_PER_SST * 1e6 / 128)
    infos = [s.info for s in inputs.ssts]
    assert [i.min_seq for i in infos] == sorted((i.min_seq for i in infos), reverse=True)  # newest first
    assert 0.7 * inputs.stored_bytes < inputs.logical_bytes < 1.5 * inputs.stored_bytes
    table = SstReader.open(LocalStore(inputs.root), inputs.object_keys()[0]).read_table()
    keys, values = table.column("key").to_pylist(), table.column("value").to_pylist()
    assert {len(k) for k in keys} == {bench.KEY_BYTES} and keys == sorted(set(keys))
    assert {len(v) for v in values} == {0, bench.VALUE_BYTES}  # tombstones have empty values
    expected = expected_content(inputs, inputs.root)
    assert len(expected) == inputs.live_keys
    assert 0.15 < 1 - inputs.live_keys / inputs.rows < 0.4  # ~25 % shadowed, ~2 % deleted
    assert bench.build_inputs(tmp_path / "again", MB_PER_SST).live_keys == inputs.live_keys  # seeded


def test_a_compaction_of_a_fresh_copy_keeps_the_content(tmp_path: Path) -> None:
    inputs = bench.build_inputs(tmp_path / "in", MB_PER_SST)
    store = bench.fresh_copy(inputs, tmp_path)
    options = CompactorOptions(min_sources=2, max_sources=bench.SSTS, max_subcompaction_bytes=64 * 1024)
    report = compact_once(bench.DB_PATH, store, options, LocalExecutor(2), full=False)
    assert report is not None and report.subcompactions > 1 and report.rows_out == inputs.live_keys
    reader_options = ReaderOptions(
        manifest_poll_interval=timedelta(hours=1), checkpoint_lifetime=timedelta(hours=3)
    )
    with DbReader.open(bench.DB_PATH, store, options=reader_options) as reader:
        assert dict(reader.scan()) == expected_content(inputs, inputs.root)
    assert bench.fresh_copy(inputs, tmp_path).root != store.root  # inputs untouched, copies independent


def test_local_part_and_report(tmp_path: Path) -> None:
    inputs = bench.build_inputs(tmp_path / "in", MB_PER_SST)
    meter = bench.Meter()
    results = bench.run_local(inputs, tmp_path, meter, repeat=1, progress=lambda _: None)
    assert [r.name for r in results] == [
        "raw limit (read_table, sort, encode_sst)",
        *[f"LocalExecutor(threads={t})" for t in (1, 2)] * 2,
    ]
    assert [r.subcompaction_bytes for r in results[1:]] == [bench.MAIN_SUBCOMPACTION] * 2 + [
        bench.LARGE_SUBCOMPACTION
    ] * 2
    assert all(r.seconds > 0 and r.input_bytes == inputs.stored_bytes for r in results)
    assert results[0].rows_out == inputs.rows and all(r.rows_out == inputs.live_keys for r in results[1:])
    report = bench.render_report(inputs, results, "bench_compaction.py --test", meter)
    assert report.count("| LocalExecutor(threads=") == 4 + 4  # 4 result rows, 4 target rows
    assert "| Spark local[2] / local[1] >= 1.6 | not run | - |" in report
