"""maintenance_job on the demo database: launch to success, steps in process vs one process per step.

Each measurement writes a fresh demo database (as ``.ci/demo`` does: 4 L0 SSTs of 1,000 keys and a
checkpoint that expires at once) into a local directory store, then runs ``maintenance_job`` for
real (every step's op config ``dry_run: false``, partition ``demo``) with ``dagster job execute``
on a fresh Dagster instance, and reads the run's record: launch (run created) to success, and run
start to success; plus the wall time of the whole command (interpreter start and code loading
included). The shipped job runs its steps in the run's process (``dg.in_process_executor``); the
reference is the same job with Dagster's multiprocess executor, one process per step (how it ran
before issue 14), built by ``benchmarks/multiprocess_location.py``.

Run: ``python -m benchmarks.bench_orchestration`` (``--quick``: one repetition)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.reporting import argument_parser, markdown_table, output, publish
from benchmarks.suite import Options, Outcome, Target, row

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "orchestration.md"
DAGSTER = str(Path(sys.executable).with_name("dagster"))
EXECUTORS = {
    "in process (shipped)": ("definitions.py", "maintenance_job"),
    "multiprocess (before issue 14)": ("benchmarks/multiprocess_location.py", "maintenance_job_multiprocess"),
}
TAGS = '{"dagster/partition": "demo"}'
REAL_RUN = textwrap.dedent(
    """\
    ops:
      maintenance_expire_checkpoints: {config: {dry_run: false}}
      maintenance_compact: {config: {dry_run: false}}
      maintenance_tag_policy: {config: {dry_run: false}}
      maintenance_gc: {config: {dry_run: false}}
    """
)
DEMO_DATA = textwrap.dedent(
    """\
    import time
    from slate_ops import Db, admin
    from slate_ops.config import CheckpointOptions
    from slate_ops.objstore import open_store
    from slate_ops.orchestration.config import default_store_url

    store = open_store(default_store_url())
    with Db.open("demo", store) as db:
        for round_ in range(4):
            for i in range(1000):
                db.put(b"user:%05d" % i, b"round %d" % round_)
            db.flush_memtable()
    admin.create_checkpoint("demo", store, CheckpointOptions(lifetime="1s", name="short-lived"))
    time.sleep(1.5)
    """
)


@dataclass(frozen=True)
class Launch:
    executor: str
    launch_to_success_s: float
    start_to_success_s: float
    command_s: float


def measure(executor: str) -> Launch:
    """One real maintenance run of a fresh demo database with ``executor``."""
    location, job = EXECUTORS[executor]
    with tempfile.TemporaryDirectory(prefix="bench-orchestration-") as tmp:
        home = Path(tmp, "dagster_home")
        home.mkdir()
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        config = Path(tmp, "real-run.yaml")
        config.write_text(REAL_RUN)
        env = {**os.environ, "DAGSTER_HOME": str(home), "SLATE_OPS_STORE": Path(tmp, "store").as_uri()}
        env.pop("SLATE_OPS_CONFIG", None)
        subprocess.run([sys.executable, "-c", DEMO_DATA], cwd=REPO, env=env, check=True)
        started = time.perf_counter()
        subprocess.run(
            [DAGSTER, "job", "execute", "-f", location, "-j", job, "-c", str(config), "--tags", TAGS],
            cwd=REPO,
            env=env,
            check=True,
            capture_output=True,
        )
        command_s = time.perf_counter() - started
        return Launch(executor, *_run_times(home), command_s)


def _run_times(home: Path) -> tuple[float, float]:
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        (record,) = instance.get_run_records()
        assert record.dagster_run.status == dg.DagsterRunStatus.SUCCESS, record.dagster_run.status
        assert record.start_time is not None and record.end_time is not None
        created = record.create_timestamp.timestamp()
        return record.end_time - created, record.end_time - record.start_time


def run(repetitions: int) -> list[Launch]:
    return [measure(executor) for _ in range(repetitions) for executor in EXECUTORS]


def medians(launches: list[Launch]) -> dict[str, Launch]:
    """The median of each figure per executor."""
    result = {}
    for executor in EXECUTORS:
        mine = [launch for launch in launches if launch.executor == executor]
        result[executor] = Launch(
            executor,
            statistics.median(x.launch_to_success_s for x in mine),
            statistics.median(x.start_to_success_s for x in mine),
            statistics.median(x.command_s for x in mine),
        )
    return result


def table(launches: list[Launch]) -> str:
    rows = [
        [x.executor, f"{x.launch_to_success_s:.2f}", f"{x.start_to_success_s:.2f}", f"{x.command_s:.2f}"]
        for x in launches
    ]
    return markdown_table(
        ["executor", "launch to success (s)", "run start to success (s)", "`dagster job execute` (s)"],
        rows,
        "lrrr",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, RESULTS, quick="one repetition")
    args = parser.parse_args(argv)
    launches = run(1 if args.quick else 3)
    publish(table(launches) + "\n", output(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())


def collect(options: Options) -> Outcome:
    """The rows of ``python -m benchmarks --only orchestration``."""
    repetitions = 1 if options.quick else 3
    launches = run(repetitions)
    typical = medians(launches)
    ours, before = typical["in process (shipped)"], typical["multiprocess (before issue 14)"]
    label = "multiprocess executor"
    rows = [
        row(
            "orchestration",
            "maintenance_job launch to success, demo database, real run",
            "s",
            ours.launch_to_success_s,
            before.launch_to_success_s,
            label,
            Target("ratio", "<=", 0.25),
            note="steps in the run's process vs one process per step (before issue 14)",
        ),
        row(
            "orchestration",
            "  … whole `dagster job execute` command",
            "s",
            ours.command_s,
            before.command_s,
            label,
            note="interpreter start and code loading included",
        ),
    ]
    setup = (
        f"{repetitions} repetition(s) per executor (medians), a fresh demo database and Dagster "
        "instance each, local directory store"
    )
    return Outcome(rows, setup, table(launches), table(launches) + "\n\n" + setup + "\n")
