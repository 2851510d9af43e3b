"""The adversarial simulation (tests/reliability/sim/adversary/, issue 19): short runs in CI, a long
run behind ``slow`` that writes tests/reliability/results/adversary.json, determinism (in one process
and across processes), and replay.

Replay a seed (a violation prints the seed, the replay command, the trace tail and the interleaved
store calls)::

    SLATE_OPS_ADV_SEED=3 SLATE_OPS_ADV_STEPS=1000 pytest tests/reliability/test_adversary.py -k replay -s

The long run: ``pytest -m slow tests/reliability/test_adversary.py`` (seeds and steps from
``SLATE_OPS_ADV_LONG_SEEDS`` / ``SLATE_OPS_ADV_LONG_STEPS``, 20 x 5,000 by default; the figures go to
``SLATE_OPS_ADV_RESULTS``, default tests/reliability/results/adversary.json).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slate_ops import admin
from slate_ops.engine import Db
from slate_ops.errors import FencedError
from slate_ops.objstore import MemoryStore
from tests.reliability import report
from tests.reliability.sim.adversary import AdvConfig, AdvResult, run_adversary
from tests.reliability.sim.runtime import (
    WRITER_OPTIONS,
    InvariantViolation,
    digest_in_another_process,
)
from tests.support.engine import simulate_crash

ROOT = Path(__file__).resolve().parents[2]
ADVERSARY_CI_SEEDS = (1, 2, 3)
ADVERSARY_CI_STEPS = 500
ADVERSARY_LONG_SEEDS = int(os.environ.get("SLATE_OPS_ADV_LONG_SEEDS", "20"))
ADVERSARY_LONG_STEPS = int(os.environ.get("SLATE_OPS_ADV_LONG_STEPS", "5000"))
ADVERSARY_RESULTS = Path(
    os.environ.get("SLATE_OPS_ADV_RESULTS", str(ROOT / "tests/reliability/results/adversary.json"))
)


def _assert_adversary_exercised(result: AdvResult) -> None:
    """The adversarial actors ran and every invariant was checked."""
    figures, checks = result.figures, result.checks
    assert figures["races"] > 0 and figures["interleaved_store_calls"] > 0
    assert sum(n for k, n in figures.items() if k.startswith("paused_writer_across_")) > 0
    assert figures["paused_process_episodes"] > 0 and figures["paused_process_stalls"] > 0
    assert sum(n for k, n in figures.items() if k.startswith("admin_calls_")) > 0
    assert sum(n for k, n in figures.items() if k.startswith("names_")) > 0
    assert figures["durable_writes_acknowledged"] > 0
    for invariant in (
        "references_reachable",
        "no_fenced_writer_acknowledges",
        "acknowledged_writes_readable",
        "objects_of_no_database_kept",
    ):
        assert checks[invariant] > 0, invariant


@pytest.mark.parametrize("seed", ADVERSARY_CI_SEEDS)
def test_adversary(seed: int) -> None:
    """Racing writers, paused writers across destroy/GC/split/rollback, paused compactors and GC,
    admin calls on protected checkpoints, hostile names: every invariant holds."""
    result = run_adversary(AdvConfig(seed=seed, steps=ADVERSARY_CI_STEPS))
    print(result.summary())
    _assert_adversary_exercised(result)


def test_adversary_same_seed_same_trace() -> None:
    """Real threads, one store call at a time: the seed alone decides the interleaving — in this
    process and in another one (another hash seed); another seed takes another path."""
    first = run_adversary(AdvConfig(seed=21, steps=150))
    second = run_adversary(AdvConfig(seed=21, steps=150))
    other = run_adversary(AdvConfig(seed=22, steps=100))
    assert first.trace == second.trace
    assert first.digest == second.digest
    assert other.digest != first.digest
    statement = (
        "from tests.reliability.sim.adversary import AdvConfig, run_adversary\n"
        "print(run_adversary(AdvConfig(seed=21, steps=150)).digest)"
    )
    assert digest_in_another_process(statement, hash_seed=4321) == first.digest


def test_a_path_removed_by_hand_and_created_again_holds_nothing_old() -> None:
    """A writer's database is removed by hand (``aws s3 rm --recursive``: no tombstone, no fence);
    the writer's next durable put is refused — but its WAL SST was created before the confirmation
    that refused it. A database created at the path afterwards must hold nothing of the old one.
    (Found by the adversary's long run, seeds 2014 and 2017; fixed: a writer that finds its database
    deleted deletes the WAL SSTs it wrote since its last acknowledgement — docs/design/coordination.md,
    "Fencing under races".)"""
    store = MemoryStore()
    admin.create_db("db", store)
    stale = Db.open("db", store, WRITER_OPTIONS, background=False)
    try:
        stale.put(b"a", b"before")
        stale.flush()
        for meta in list(store.list("db/")):
            store.delete(meta.key)
        with pytest.raises(FencedError):
            stale.put(b"b", b"refused", await_durable=True)
    finally:
        simulate_crash(stale)
    admin.create_db("db", store)
    with Db.open("db", store, WRITER_OPTIONS, background=False) as fresh:
        assert dict(fresh.scan()) == {}


@pytest.fixture(scope="module")
def adversary_results() -> Iterator[dict[int, dict[str, Any]]]:
    runs: dict[int, dict[str, Any]] = {}
    started = time.monotonic()
    yield runs
    if runs:
        write_adversary_results(
            ADVERSARY_RESULTS,
            [runs[seed] for seed in sorted(runs)],
            time.monotonic() - started,
            "pytest tests/reliability/test_adversary.py -m slow",
        )


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("seed", range(2000, 2000 + ADVERSARY_LONG_SEEDS))
def test_adversary_long(seed: int, adversary_results: dict[int, dict[str, Any]]) -> None:
    """The long run: ``ADVERSARY_LONG_SEEDS`` x ``ADVERSARY_LONG_STEPS`` steps (20 x 5,000 = 100,000)."""
    config = AdvConfig(seed=seed, steps=ADVERSARY_LONG_STEPS)
    started = time.monotonic()
    try:
        result = run_adversary(config)
    except InvariantViolation as violation:
        adversary_results[seed] = {
            "seed": seed,
            "steps": config.steps,
            "duration_s": round(time.monotonic() - started, 2),
            "violation": str(violation).splitlines()[1].strip(),
            "details": str(violation),
        }
        raise
    adversary_results[seed] = result.to_json()
    _assert_adversary_exercised(result)


def write_adversary_results(path: Path, runs: list[dict[str, Any]], seconds: float, command: str) -> None:
    """``{stamp..., "config", "totals", "runs": [AdvResult.to_json() or {seed, steps, violation}]}``."""
    totals: dict[str, Any] = {"seeds": len(runs), "steps": 0, "duration_s": 0.0, "violations": 0}
    sums: dict[str, Counter[str]] = {part: Counter() for part in ("checks", "operations", "figures")}
    for run in runs:
        totals["steps"] += run["steps"]
        totals["duration_s"] += run.get("duration_s", 0.0)
        totals["violations"] += "violation" in run
        for part, counter in sums.items():
            counter.update(run.get(part, {}))
    totals["duration_s"] = round(totals["duration_s"], 1)
    totals["invariant_checks"] = sum(sums["checks"].values())
    for part, counter in sums.items():
        totals[part] = dict(sorted(counter.items()))
    document = {
        **report.stamp(command),
        "config": {
            "seeds": [run["seed"] for run in runs],
            "steps_per_seed": sorted({run["steps"] for run in runs}),
            "defaults": {k: v for k, v in vars(AdvConfig(seed=0)).items() if k not in ("seed", "steps")},
            "cpus": os.cpu_count(),
            "wall_s": round(seconds, 1),
        },
        "totals": totals,
        "runs": runs,
    }
    report.write_json(path, document)


def test_adversary_replay() -> None:
    """Replays ``SLATE_OPS_ADV_SEED`` for ``SLATE_OPS_ADV_STEPS`` steps (skipped without them)."""
    seed = os.environ.get("SLATE_OPS_ADV_SEED")
    if seed is None:
        pytest.skip("set SLATE_OPS_ADV_SEED (and SLATE_OPS_ADV_STEPS) to replay an adversarial seed")
    config = AdvConfig(
        seed=int(seed), steps=int(os.environ.get("SLATE_OPS_ADV_STEPS", str(ADVERSARY_CI_STEPS)))
    )
    result = run_adversary(config)  # a violation prints the seed, the replay command, the trace tail
    print(result.summary())
    shown = result.trace if os.environ.get("SLATE_OPS_SIM_TRACE") == "all" else result.trace[-60:]
    print("\n".join(str(entry) for entry in shown))
