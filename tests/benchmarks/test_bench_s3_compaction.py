"""Smoke test of the S3 compaction benchmark's harness, so it cannot rot: tiny inputs, moto and its
latency proxy in a child process, default options local and on S3, one sweep size."""

from __future__ import annotations

from benchmarks import bench_s3_compaction as bench
from slate_ops.compaction import CompactorOptions


def test_a_tiny_run_compacts_locally_and_on_s3_with_the_same_result_shape() -> None:
    inputs, runs = bench.run(0.1, (0.0,), (32 * bench.MiB,), 1, progress=lambda _: None)
    by_store = {(r.store, r.default): r for r in runs}
    local, s3 = by_store[("local", True)], by_store[("S3 +0 ms", True)]
    assert local.subcompaction_bytes == CompactorOptions().max_subcompaction_bytes
    assert (s3.subcompactions, s3.outputs) == (local.subcompactions, local.outputs)
    assert s3.input_bytes == local.input_bytes == inputs.stored_bytes
    assert s3.requests.get("GET", 0) > 0 and s3.requests.get("PUT", 0) >= s3.outputs
    assert not local.requests  # the local directory sends no HTTP request
    assert ("local", False) in by_store and ("S3 +0 ms", False) in by_store  # the sweep ran too
    assert "default options" in bench.render(runs)


def test_the_latency_row_pairs_each_round_and_the_best_runs() -> None:
    def run(store: str, seconds: float, round_: int, default: bool = True) -> bench.Run:
        return bench.Run(store, 16 * bench.MiB, default, 9, 9, 100, seconds, {"GET": 1}, 1.0, round_)

    every = [
        run("S3 +0 ms", 2.0, 0), run("S3 +50 ms", 2.6, 0),
        run("S3 +0 ms", 1.5, 1), run("S3 +50 ms", 2.1, 1),
        run("S3 +50 ms", 1.0, 1, default=False),  # a sweep run: not the default, not paired
    ]  # fmt: skip
    assert bench.latency_rounds(every, "S3 +50 ms", "S3 +0 ms") == [1.3, 2.1 / 1.5]
    best = {(r.store, r.default): r.seconds for r in bench.best_of_rounds(every)}
    assert best == {("S3 +0 ms", True): 1.5, ("S3 +50 ms", True): 2.1, ("S3 +50 ms", False): 1.0}
