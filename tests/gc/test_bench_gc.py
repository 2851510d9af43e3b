"""Smoke test of benchmarks/bench_gc.py on a small database: the request budget it documents."""

from __future__ import annotations

from benchmarks import bench_gc


def test_requests_per_run_are_a_small_constant_plus_one_delete_per_object() -> None:
    rows = {row.scenario: row for row in bench_gc.run_scenarios(rounds=30)}
    dry_old, real_old = rows["dry run, all garbage a day old"], rows["real run, all garbage a day old"]
    assert dry_old.deleted == real_old.deleted > 0
    assert dry_old.total <= 10 and dry_old.counts.get("delete", 0) == 0
    assert real_old.counts["delete"] == real_old.deleted
    assert real_old.total - real_old.deleted <= 16
    steady = rows["real run again (steady state)"]
    assert steady.deleted == 0 and steady.total <= 12
    active = rows["dry run, writer active in the last 5 min"]
    # the issue-204 history: one GET per manifest younger than min_age (here all 30 rounds)
    assert active.counts["get"] <= 30 * 2 + 6
    assert "| scenario | objects | deleted | requests |" in bench_gc.table(list(rows.values()))
