"""Run the interleaving explorations and record them in tests/reliability/results/interleavings.json.

    python -m tests.reliability.interleavings.run [--ci] [--scenario NAME] [--bound N|none] [--no-record]

``--ci`` runs the default-test-run configuration (:data:`CI_RUNS`); without it, the full one
(:data:`FULL_RUNS`, what ``pytest -m slow tests/reliability/interleavings`` runs). ``--baseline`` stores
the run as the record of an older revision (``baseline`` of the file) instead of ``full``/``ci``.

The result file (read by ``tests/reliability/report.py``, which renders it into docs/reliability.md)::

    {
      "reduction": "<text: the partial-order reduction used>",
      "independence": "<text: when two store calls are independent>",
      "gated": "<text: which calls are gated>",
      "full": RUN | null,          # pytest -m slow / python -m tests.reliability.interleavings.run
      "ci": RUN | null,            # the default test run's subset
      "baseline": RUN | null       # the same explorations on the code before issue 19's fixes
    }
    RUN = {
      "recorded": "YYYY-MM-DD", "command": str, "git_commit": "<12 hex>[ (modified)]",
      "load_average": [1 min, 5 min, 15 min], "seconds": float,
      "scenarios": [SCENARIO, ...]
    }
    SCENARIO = {
      "name": "two_writers" | "writer_across_destroy" | "compactor_takeover" | ...,
      "description": str,                 # one line: the actors and what they do
      "preemption_bound": int | null,     # null: no bound (exhaustive up to the reduction)
      "exhaustive": bool,                 # true: every interleaving (up to sleep-set equivalence)
      "complete": bool,                   # false: stopped at max_executions (then a lower bound)
      "interleavings": int,               # complete executions checked (one per trace explored)
      "sleep_blocked": int,               # prefixes cut by the sleep sets (equivalent elsewhere)
      "max_depth": int,                   # most gated store calls in one execution
      "violating": int,                   # interleavings where an invariant failed
      "problems": {kind: count},          # kinds of violation (the text before the first colon)
      "outcomes": {"A:ok/ok/ok B:...": n},  # how each actor's operations ended, per interleaving
      "first_violation": str | null,      # the first violating schedule, rendered
      "seconds": float
    }
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.reliability.interleavings.explorer import Explorer, Report
from tests.reliability.interleavings.scenarios import (
    CompactorTakeover,
    TwoWriters,
    WriterAcrossDestroy,
)
from tests.reliability.report import stamp

ROOT = Path(__file__).resolve().parents[3]
RESULTS = Path(
    os.environ.get(
        "SLATE_OPS_INTERLEAVINGS_RESULTS", str(ROOT / "tests/reliability/results/interleavings.json")
    )
)
REDUCTION = (
    "sleep sets (Godefroid) over a depth-first search that replays every schedule from scratch: sound "
    "(at least one execution of every Mazurkiewicz trace) and no two complete executions equivalent; "
    "an optional CHESS preemption bound, stated per scenario (a bounded run checks the executions "
    "within the bound that the sleep sets do not cut as equivalent to another explored one)"
)
INDEPENDENCE = (
    "two store calls are independent when they come from different actors and both only read (get, "
    "head, list) or touch disjoint keys (a list touches every key under its prefix); calls of one actor "
    "(its main thread, flusher, pools) are always dependent"
)
GATED = (
    "every store call except reads and writes of SST data (get/head/put under <db>/compacted/): "
    "manifest/, wal/, compactions/, gc/, and lists and deletes of compacted/"
)


@dataclass(frozen=True)
class Run:
    scenario: str
    preemption_bound: int | None
    max_executions: int | None = None


FULL_RUNS = (
    # Every scenario exhaustively (no preemption bound): ~100 s, ~190 s and ~45 s on this machine.
    Run("two_writers", None),
    Run("writer_across_destroy", None),
    Run("compactor_takeover", None),
)
CI_RUNS = (
    Run("two_writers", 2),
    # At 2 preemptions, as the full run's hardest schedules need: a stale writer paused across a
    # destroy is switched out once and back once.
    Run("writer_across_destroy", 2),
    Run("compactor_takeover", 1),
)


def scenario_of(name: str) -> Any:
    if name == "two_writers":
        return TwoWriters()
    if name == "writer_across_destroy":
        return WriterAcrossDestroy()
    if name == "compactor_takeover":
        return CompactorTakeover()
    if name == "compactor_takeover_start_only":
        return CompactorTakeover(second_runs=False)
    raise KeyError(name)


def explore(run: Run) -> Report:
    scenario = scenario_of(run.scenario)
    explorer = Explorer(
        scenario,
        preemption_bound=run.preemption_bound,
        max_executions=run.max_executions,
        classify=scenario.classify,
    )
    return explorer.explore()


def scenario_json(run: Run, report: Report) -> dict[str, Any]:
    scenario = scenario_of(run.scenario)
    description = (scenario.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    return {
        "name": report.scenario,
        "description": " ".join(description.split()),
        "preemption_bound": report.preemption_bound,
        "exhaustive": report.preemption_bound is None and report.complete,
        "complete": report.complete,
        "interleavings": report.interleavings,
        "sleep_blocked": report.sleep_blocked,
        "max_depth": report.max_depth,
        "violating": report.violating,
        "problems": dict(sorted(report.problem_kinds.items())),
        "outcomes": dict(sorted(report.outcomes.items())),
        "first_violation": report.violations[0].render() if report.violations else None,
        "seconds": round(report.duration_s, 1),
    }


def run_json(runs: tuple[Run, ...], command: str, git_commit: str | None = None) -> dict[str, Any]:
    started = time.monotonic()
    scenarios = []
    for run in runs:
        report = explore(run)
        print(report.summary(), flush=True)
        scenarios.append(scenario_json(run, report))
    record = stamp(command)
    if git_commit:
        record["git_commit"] = git_commit
    return {
        **record,
        "seconds": round(time.monotonic() - started, 1),
        "scenarios": scenarios,
    }


def record(which: str, data: dict[str, Any], results: Path = RESULTS) -> None:
    """Store ``data`` as ``which`` (full, ci or baseline) of the result file, keeping the others."""
    current: dict[str, Any] = {}
    if results.exists():
        current = json.loads(results.read_text())
    current.update({"reduction": REDUCTION, "independence": INDEPENDENCE, "gated": GATED})
    for key in ("full", "ci", "baseline"):
        current.setdefault(key, None)
    current[which] = data
    results.parent.mkdir(parents=True, exist_ok=True)
    tmp = results.with_name(results.name + ".tmp")
    tmp.write_text(json.dumps(current, indent=1) + "\n")
    tmp.replace(results)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    parser.add_argument("--ci", action="store_true", help="the default test run's configuration")
    parser.add_argument("--scenario", action="append", help="only these scenarios")
    parser.add_argument("--bound", help="preemption bound for every scenario (an int, or none)")
    parser.add_argument("--max-executions", type=int)
    parser.add_argument("--baseline", metavar="GIT_COMMIT", help="record as the baseline of this commit")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)  # the code under test logs every fenced actor
    runs: tuple[Run, ...] = CI_RUNS if args.ci else FULL_RUNS
    if args.scenario:
        runs = tuple(r for r in runs if r.scenario in args.scenario)
    if args.bound is not None or args.max_executions is not None:
        bound = None if args.bound in (None, "none") else int(args.bound)
        runs = tuple(
            Run(r.scenario, bound if args.bound is not None else r.preemption_bound, args.max_executions)
            for r in runs
        )
    command = "python -m tests.reliability.interleavings.run " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    data = run_json(runs, command.strip(), args.baseline)
    for scenario in data["scenarios"]:
        if scenario["first_violation"]:
            print(scenario["first_violation"])
    if not args.no_record:
        record("baseline" if args.baseline else ("ci" if args.ci else "full"), data)


if __name__ == "__main__":
    main()
