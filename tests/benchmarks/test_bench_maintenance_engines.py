"""Smoke test of the maintenance benchmark (SlateDB databases vs ours through the admin handle), so
its harness cannot rot: tiny databases, the local directory and moto behind the latency proxy at
+0 ms, one call per operation. Needs the slatedb extra (CI installs it)."""

from __future__ import annotations

import re

import pytest

from benchmarks import bench_maintenance_engines as bench
from benchmarks.latency_proxy import _is_list

# The whole benchmark end to end on moto behind the latency proxy (~25 s): in CI's second step
# (`pytest -m "cluster or e2e"`), keeping the default run well under 10 minutes.
pytestmark = [pytest.mark.s3, pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def run() -> bench.Run:
    pytest.importorskip("slatedb.uniffi")
    return bench.run(bench.Sizes(keys=50, rounds=4, repeat=1, delays=(None, 0.0), history=8))


def test_both_engines_are_measured_on_both_stores_through_the_handle(run: bench.Run) -> None:
    for store in ("local directory", "S3 +0 ms"):
        for engine in bench.ENGINES:
            for operation in ("open (detect engine)", "describe", "GC plan", "GC run (real)"):
                m = bench.find(run, store, engine, operation)
                assert m is not None and m.unavailable is None and m.seconds, (store, engine, operation)
    opened = bench.find(run, "S3 +0 ms", "slatedb", "open (detect engine)")
    assert opened is not None and opened.result == "engine slatedb"
    for where in ("local", "S3"):  # the same shape on both engines
        for engine in bench.ENGINES:
            assert run.shapes[f"{engine}, {where}"].startswith("1 L0 + 1 sorted run(s)")
    assert not run.skipped


def test_requests_are_counted_at_the_endpoint_for_both_engines(run: bench.Run) -> None:
    for operation in bench.OPERATIONS:
        ours = bench.find(run, "S3 +0 ms", "slate_ops", operation)
        assert ours is not None and ours.unavailable is None
        # the proxy sees exactly what slate_ops' CountingStore counts (a LIST is one page here)
        assert ours.total == ours.ours_requests, operation
    describe = bench.find(run, "S3 +0 ms", "slatedb", "describe")
    assert describe is not None and describe.total and describe.ours_requests == 0  # the binding's alone
    gc = bench.find(run, "S3 +0 ms", "slatedb", "GC run (real)")
    assert gc is not None and gc.total is not None and gc.ours_requests is not None
    assert gc.total > gc.ours_requests > 0  # slate_ops' listing and the binding's run, both counted
    local = bench.find(run, "local directory", "slatedb", "describe")
    assert local is not None and local.requests == {}  # no endpoint to count the binding at


def test_the_plan_writes_nothing_and_slatedbs_dry_run_does(run: bench.Run) -> None:
    databases = {c.database for c in run.gc}
    assert databases == {"same shape", "8 flushes"}
    for database in databases:
        calls = {c.call: c for c in run.gc if c.database == database}
        plan, dry, real = calls[bench.PLAN], calls[bench.SLATEDB_DRY], calls[bench.SLATEDB_REAL]
        assert plan.writes == 0 and plan.requests.get("LIST", 0) >= 4
        assert calls[bench.OURS_PLAN].writes == 0
        assert dry.writes > 0  # measured: boundary files (docs/design/slatedb-engine.md §3)
        planned = int(re.match(r"(\d+) objects planned", plan.result).group(1))  # type: ignore[union-attr]
        deleted = int(re.search(r"(\d+) objects deleted", real.result).group(1))  # type: ignore[union-attr]
        assert planned == deleted > 0, database  # the plan listed what SlateDB's own run then deleted
    text = bench.render(run)
    assert "SlateDB's run_gc_once, every directory dry_run" in text and "of which the binding's" in text


def test_a_bucket_get_is_a_list() -> None:
    assert _is_list("/bench-1?list-type=2&prefix=dbs%2F")
    assert _is_list("/bench-1")
    assert not _is_list("/bench-1/dbs/x/manifest/00000000000000000001.manifest")
