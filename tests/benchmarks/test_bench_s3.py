"""Smoke test of the S3 benchmark (benchmarks/bench_s3.py) on tiny sizes, without SlateDB: every
figure is measured through the latency proxy on moto, and the request counts are the ones each
operation must make."""

from __future__ import annotations

import pytest

from benchmarks import bench_s3 as bench
from benchmarks.suite import Options

TINY = bench.Sizes(wal_ssts=4, durable_puts=5, concurrent_puts=16, puts=300, keys=200, l0_ssts=2, gets=12)


@pytest.fixture(scope="module")
def results() -> bench.S3Results:
    return bench.run(TINY, (0.0,), use_slatedb=False)


def figure(results: bench.S3Results, name: str) -> bench.Measured:
    found = results.find(name, bench.OURS, 0)
    assert found is not None, name
    return found


def test_only_our_engine_and_the_bound_run_without_slatedb(results: bench.S3Results) -> None:
    ours = {(f, bench.OURS) for f in bench.FIGURES}
    bounds = {(f, bench.BOUND) for f in (bench.DURABLE, bench.DURABLE_CONCURRENT)}
    assert {(m.figure, m.engine) for m in results.figures} == ours | bounds
    assert results.notes["slatedb"] == "not run (--no-slatedb)"


def test_the_bound_sends_one_create_per_put_and_nothing_else(results: bench.S3Results) -> None:
    for name, n in ((bench.DURABLE, TINY.durable_puts), (bench.DURABLE_CONCURRENT, TINY.concurrent_puts)):
        bound = results.find(name, bench.BOUND, 0)
        assert bound is not None and bound.ops == len(bound.latencies) == n
        assert bound.requests == {"PUT": n}


def test_a_failed_put_fails_the_closed_loop_measurement() -> None:
    done: list[int] = []

    def put(i: int) -> None:
        if i == 5:
            raise RuntimeError("put 5 failed")
        done.append(i)

    with pytest.raises(RuntimeError, match="put 5 failed"):
        bench.timed_closed_loop(put, 16, 4)
    assert 5 not in done and len(done) < 16  # the thread of put 5 stopped there
    seconds, latencies = bench.timed_closed_loop(lambda i: None, 16, 4)
    assert len(latencies) == 16 and seconds >= 0


def test_each_durable_put_of_one_writer_waits_for_its_own_wal_put(results: bench.S3Results) -> None:
    one = figure(results, bench.DURABLE)
    assert one.ops == len(one.latencies) == TINY.durable_puts
    assert one.requests.get("PUT") == TINY.durable_puts  # one WAL SST per awaited put, no L0 flush
    assert one.requests_per_unit >= 1000
    many = figure(results, bench.DURABLE_CONCURRENT)
    assert many.ops == len(many.latencies) == TINY.concurrent_puts
    assert 1 <= many.requests.get("PUT", 0) <= TINY.concurrent_puts  # several writers may share one


def test_non_durable_puts_make_few_wal_ssts(results: bench.S3Results) -> None:
    puts = figure(results, bench.NON_DURABLE)
    assert puts.ops == TINY.puts and not puts.latencies
    assert 1 <= puts.requests.get("PUT", 0) < TINY.puts / 10  # batched by the WAL flush interval


def test_cold_gets_read_from_the_store_and_scan_sees_every_row(results: bench.S3Results) -> None:
    gets = figure(results, bench.COLD_GETS)
    assert gets.ops == len(gets.latencies) == TINY.gets
    # cold: at least one GET per L0 SST touched, and never more than tail + block per get
    assert 1 <= gets.requests.get("GET", 0) <= 2 * TINY.gets
    assert set(gets.requests) == {"GET"}
    scan = figure(results, bench.SCAN)
    assert scan.ops == TINY.keys
    assert scan.requests.get("GET", 0) >= TINY.l0_ssts and scan.requests_per_unit == scan.total_requests


def test_reader_open_and_scan_on_overlapping_and_adjacent_ssts(results: bench.S3Results) -> None:
    for name in bench.OPEN_SCANS:
        scan = figure(results, name)
        assert scan.ops == TINY.keys and scan.requests_per_unit == scan.total_requests
        # the reader's open commits its checkpoint (one PUT); every SST's tail and blocks are read
        assert scan.requests.get("PUT") == 1 and scan.requests.get("GET", 0) >= 2 * TINY.l0_ssts


def test_reopens_replay_every_wal_sst(results: bench.S3Results) -> None:
    assert [r.engine for r in results.reopens] == ["slate_ops, one at a time", "slate_ops, 16 at a time"]
    assert all(r.wal_gets == TINY.wal_ssts for r in results.reopens)


def test_percentiles_are_nearest_rank() -> None:
    m = bench.Measured(
        bench.COLD_GETS, bench.OURS, 0, 100, 1.0, {"GET": 31}, tuple(i / 1000 for i in range(1, 101))
    )
    assert (m.percentile_ms(50), m.percentile_ms(99), m.percentile_ms(100)) == (50.0, 99.0, 100.0)
    assert m.requests_per_unit == 0.31 and m.per_second == 100
    assert bench.Measured(bench.NON_DURABLE, bench.OURS, 0, 4000, 1.0, {"PUT": 2}).requests_per_unit == 0.5
    assert bench.Measured(bench.SCAN, bench.OURS, 0, 4000, 1.0, {"PUT": 2}).percentile_ms(50) is None


def test_collect_gives_summary_rows_without_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "QUICK", TINY)
    outcome = bench.collect(Options(quick=True, spark=False, slatedb=False))
    assert outcome.skipped == ["SlateDB's binding: --no-slatedb"]
    metrics = [r.metric for r in outcome.rows]
    assert "durable put p99 at +50 ms, 1 writer" in metrics
    assert "full scan after reopen at +50 ms" in metrics
    assert "reader open + full scan, overlapping SSTs at +50 ms, vs SlateDB with read-ahead" in metrics
    assert "reader open + full scan, adjacent SSTs at +50 ms, vs SlateDB's defaults" in metrics
    assert "reopen after 4 WAL SSTs at +50 ms, 16 WAL GETs at a time" in metrics
    assert all(r.benchmark == "s3" and r.ours is not None for r in outcome.rows)
    assert all(r.met is None for r in outcome.rows)  # no SlateDB: nothing judged
    assert all(r.reference is None for r in outcome.rows if r.reference_label != bench.BOUND)
    bound = f"durable puts at +50 ms, {bench.WRITERS} writers: slate_ops vs the bound"
    vs_bound = next(r for r in outcome.rows if r.metric == bound)
    assert vs_bound.reference is not None and vs_bound.ours is not None  # ours against bare PUTs
    slow = next(r for r in outcome.rows if r.metric == "durable put p50 at +50 ms, 1 writer")
    assert slow.ours is not None and slow.ours >= 50  # each durable put waits at least one round trip
    assert "durable puts, 1 writer" in outcome.markdown and "WAL GETs" in outcome.markdown
