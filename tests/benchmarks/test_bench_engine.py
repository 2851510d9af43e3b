"""Smoke test of the engine benchmark's harness, on our engine only and at a tiny N."""

from __future__ import annotations

from pathlib import Path

from benchmarks import bench_engine as bench
from slate_ops import Db
from slate_ops.objstore import LocalStore

N = 1_500


def read_back(root: Path) -> list[tuple[bytes, bytes]]:
    with Db.open(bench.DB_PATH, LocalStore(root)) as db:
        return list(db.scan())


def test_dataset_shape() -> None:
    data = bench.make_dataset(N)
    keys = [k for k, _ in data.rows]
    assert len(set(keys)) == N and {len(k) for k in keys} == {16}
    assert {len(v) for _, v in data.rows} == {bench.VALUE_SIZE}
    assert sorted(data.get_order) == sorted(data.rows) and keys != sorted(keys)  # shuffled
    assert data.payload_bytes == N * (16 + bench.VALUE_SIZE)
    assert bench.make_dataset(N).rows == data.rows  # seeded


def test_ours_phases_write_and_read_the_data(tmp_path: Path) -> None:
    data = bench.make_dataset(N)
    meter = bench.Meter()
    expected = sorted(data.rows)

    for name, phase in (("seq", bench.ours_sequential_puts), ("batch", bench.ours_batched_puts)):
        (m,) = phase(tmp_path / name, data, meter)
        assert m.ops == N and m.seconds > 0 and m.payload_bytes == data.payload_bytes
        assert m.peak_rss_delta_kib >= 0
        assert read_back(tmp_path / name) == expected

    cold, warm = bench.ours_random_gets(tmp_path / "gets", data, meter)
    assert (cold.phase, warm.phase) == (bench.GETS_COLD, bench.GETS_WARM)
    assert cold.ops == warm.ops == cold.verified == warm.verified == N

    (scan,) = bench.ours_scan(tmp_path / "scan", data, meter)
    assert scan.ops == scan.verified == N and scan.payload_bytes == data.payload_bytes
    assert scan.mb_per_s > 0

    small = bench.make_dataset(5, seed=7)
    (durable,) = bench.ours_durable_puts(tmp_path / "durable", small, meter)
    assert durable.ops == 5 and read_back(tmp_path / "durable") == sorted(small.rows)


def test_ours_only_report() -> None:
    rows = bench.run(300, 3, None, bench.Meter(), progress=lambda _: None)
    assert [r.phase for r in rows] == list(bench.TARGETS)
    assert all(r.ours is not None and r.theirs is None and not r.notes for r in rows)
    report = bench.render_report(rows, None, "clear_refs", "test")
    assert "not installed: ours only" in report and report.count("| n/a |") >= len(rows)


def test_meter_sees_an_allocation() -> None:
    meter = bench.Meter()
    meter.reset()
    block = bytearray(64 * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])  # touch every page
    if meter.method == "clear_refs":
        assert meter.peak_delta_kib() >= 60 * 1024
    del block
