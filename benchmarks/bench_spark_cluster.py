"""Spark on ``local[2]`` vs a two-worker standalone cluster: bulk load and compaction on moto S3.

Run: ``python -m benchmarks.bench_spark_cluster [--quick] [--rows N] [--repeat N]``.

Method
------
* One process, one moto S3 server (``ThreadedMotoServer`` on loopback); the S3 credentials reach
  the tasks only through the session's ``spark.slate_ops.s3.*`` settings, in both modes.
* ``local[2]``: :func:`slate_ops.spark.local_spark_session`. ``cluster``: a master and two workers
  of one core and 1 GiB each started from PySpark's ``spark-class``
  (:func:`slate_ops.spark.cluster.start_standalone_cluster`, no ``AWS_*`` in their environment),
  once for the whole benchmark, and a session on that master; the timing starts once both
  executors have registered. The startup itself (daemons registered, then session and executors)
  is reported separately.
* ``--repeat`` rounds (default 2); each round runs ``local[2]`` and then the cluster, each in a new
  session, so both see the same spells of load from other processes. Per mode and round, in a
  fresh database: ``bulk_load`` of ``rows`` generated rows (128 B: the input of
  ``bench_bulk_load.py``, computed by Spark), then a second ``bulk_load`` rewriting the first half
  of the keys, timed together (rows/s = 1.5 x rows / seconds); then a full Spark compaction of the
  loaded L0 SSTs (rows/s = rows in / seconds). Default options throughout (the default
  ``max_subcompaction_bytes``, 16 MiB when last measured, cuts the ~50 MB stored input into 4
  subcompactions, so both executors get tasks). An untimed warm-up load and
  compaction of 1 % of the rows first starts the Python workers. Best of the rounds per mode; every
  repetition is listed with the load average at its start.
* This machine has 2 cores for the driver, moto, both executors and their Python workers in both
  modes: the cluster adds no cores, so the ratio shows what its extra hops cost (separate executor
  JVMs, task and result transfer over RPC) or the noise of other processes, not how it scales.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from benchmarks.bench_bulk_load import ROW_BYTES, generate
from benchmarks.reporting import argument_parser, command_line, markdown_table, output, publish
from benchmarks.s3_fixtures import KEYS, REGION, new_bucket, start_moto
from benchmarks.suite import Options, Outcome, Row, command, row
from slate_ops.admin import compact
from slate_ops.compaction import CompactorOptions
from slate_ops.spark import S3Credentials, SparkExecutor, bulk_load, local_spark_session
from slate_ops.spark.cluster import standalone_cluster, wait_for_executors

RESULTS = Path(__file__).parent / "results" / "spark_cluster.md"
ROWS = 500_000
QUICK_ROWS = 100_000
COMPACTION = CompactorOptions()
MiB = 1024 * 1024
MODES = ("local[2]", "cluster")


@dataclass(frozen=True)
class Run:
    """One repetition on one mode: the two loads and the compaction, and the load average then."""

    mode: str
    rows: int
    """Rows loaded (both loads) = rows into the compaction."""
    load_seconds: float
    compaction_seconds: float
    subcompactions: int
    load_average: tuple[float, float, float]
    """1/5/15-minute load averages when the repetition started."""

    @property
    def load_rows_per_s(self) -> float:
        return self.rows / self.load_seconds

    @property
    def compaction_rows_per_s(self) -> float:
        return self.rows / self.compaction_seconds


@dataclass(frozen=True)
class Mode:
    """A mode's repetitions and what starting it cost."""

    mode: str
    runs: tuple[Run, ...]
    startup_seconds: float
    """Cluster: master and workers started and registered (once per benchmark); local[2]: 0."""
    session_seconds: float
    """The first session: started and (cluster) both executors registered."""

    @property
    def load(self) -> Run:
        return min(self.runs, key=lambda r: r.load_seconds)

    @property
    def compaction(self) -> Run:
        return min(self.runs, key=lambda r: r.compaction_seconds)

    @property
    def load_averages(self) -> str:
        """The range of 1-minute load averages at the starts of its repetitions."""
        values = sorted(r.load_average[0] for r in self.runs)
        return f"{values[0]:.1f}" if values[0] == values[-1] else f"{values[0]:.1f}-{values[-1]:.1f}"


def load_and_compact(spark: SparkSession, url: str, path: str, rows: int) -> tuple[float, float, int]:
    """Two bulk loads into ``path`` (``rows``, then the first half of the keys again) and a full
    compaction: (load seconds, compaction seconds, subcompactions)."""
    started = time.perf_counter()
    first = bulk_load(generate(spark, rows), url, path)
    second = bulk_load(generate(spark, rows // 2), url, path)
    load_seconds = time.perf_counter() - started
    assert (first.rows, second.rows) == (rows, rows // 2), (first, second)
    store = S3Credentials.of_session(spark).open_store(url)
    started = time.perf_counter()
    report = compact(path, store, full=True, executor=SparkExecutor(spark), options=COMPACTION)
    compaction_seconds = time.perf_counter() - started
    assert report is not None and (report.rows_in, report.rows_out) == (rows + rows // 2, rows), report
    return load_seconds, compaction_seconds, report.subcompactions


@contextmanager
def session(mode: str, master: str) -> Iterator[tuple[SparkSession, float]]:
    """A session on ``master`` with the S3 credentials in its settings and (cluster) both
    executors registered, and the seconds that took; stopped afterwards."""
    settings = {**S3Credentials(**KEYS).spark_conf(), "spark.app.name": f"slate_ops-bench-{mode}"}
    started = time.perf_counter()
    spark = local_spark_session(master, config=settings)
    try:
        if mode == "cluster":
            wait_for_executors(spark, 2)
        yield spark, time.perf_counter() - started
    finally:
        spark.stop()


def run(rows: int, repeat: int) -> list[Mode]:
    """``repeat`` rounds against one moto server and one cluster; each round runs local[2], then the
    cluster, each in a new session after an untimed warm-up, so both modes see the same spells of
    load from other processes."""
    server, endpoint = start_moto()
    runs: dict[str, list[Run]] = {mode: [] for mode in MODES}
    sessions: dict[str, float] = {}
    try:
        url = f"s3://{new_bucket(endpoint)}/bench?endpoint_url={endpoint}&region={REGION}"
        with tempfile.TemporaryDirectory(prefix="slate-bench-spark-cluster-") as work:
            started = time.perf_counter()
            with standalone_cluster(2, cores=1, memory="1g", work_dir=Path(work)) as cluster:
                startup = time.perf_counter() - started
                masters = {"local[2]": "local[2]", "cluster": cluster.master_url}
                for i in range(repeat):
                    for mode in MODES:
                        with session(mode, masters[mode]) as (spark, seconds):
                            sessions.setdefault(mode, seconds)
                            load_and_compact(spark, url, f"{mode}-warmup-{i}", max(rows // 100, 1000))
                            load_average = os.getloadavg()
                            load_s, compaction_s, tasks = load_and_compact(spark, url, f"{mode}-{i}", rows)
                        done = Run(mode, rows + rows // 2, load_s, compaction_s, tasks, load_average)
                        runs[mode].append(done)
                        print(
                            f"  {mode}: loads {load_s:.2f} s, compaction {compaction_s:.2f} s ({tasks} "
                            f"subcompactions), load average {_load(load_average)}",
                            file=sys.stderr,
                            flush=True,
                        )
    finally:
        server.stop()
    return [
        Mode(mode, tuple(runs[mode]), startup if mode == "cluster" else 0.0, sessions[mode]) for mode in MODES
    ]


def _load(values: tuple[float, float, float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def render_table(modes: list[Mode]) -> str:
    header = [
        "mode",
        "loads s",
        "load rows/s",
        "compaction s",
        "compaction rows/s",
        "subcompactions",
        "cluster start s",
        "session s",
        "load average (1 min)",
    ]
    lines = [
        [
            m.mode,
            f"{m.load.load_seconds:.2f}",
            f"{m.load.load_rows_per_s:,.0f}",
            f"{m.compaction.compaction_seconds:.2f}",
            f"{m.compaction.compaction_rows_per_s:,.0f}",
            m.compaction.subcompactions,
            f"{m.startup_seconds:.1f}" if m.mode == "cluster" else "—",
            f"{m.session_seconds:.1f}",
            m.load_averages,
        ]
        for m in modes
    ]
    return markdown_table(header, lines, "lrrrrrrrr")


def render_runs(modes: list[Mode]) -> str:
    """Every repetition, in the order they ran."""
    runs = sorted(
        ((i, r) for m in modes for i, r in enumerate(m.runs)), key=lambda p: (p[0], MODES.index(p[1].mode))
    )
    lines = [
        [i + 1, r.mode, f"{r.load_seconds:.2f}", f"{r.compaction_seconds:.2f}", _load(r.load_average)]
        for i, r in runs
    ]
    return markdown_table(["round", "mode", "loads s", "compaction s", "load average"], lines, "rlrrl")


def describe(rows: int, repeat: int) -> str:
    return (
        f"{rows:,} generated rows of {ROW_BYTES} B ({rows * ROW_BYTES / 1e6:.1f} MB) bulk-loaded into a "
        f"fresh database on moto S3, then the first {rows // 2:,} keys again; a full Spark compaction "
        f"of the 1.5x rows (default options: max_subcompaction_bytes "
        f"{COMPACTION.max_subcompaction_bytes / MiB:g} MiB); best of {repeat} rounds, each running both "
        "modes in a fresh session after a warm-up; "
        f"{os.cpu_count()} CPUs shared by driver, moto and executors."
    )


def render(modes: list[Mode], command_text: str, rows: int, repeat: int) -> str:
    return (
        "# Spark: local[2] vs a two-worker standalone cluster (benchmarks/bench_spark_cluster.py)\n\n"
        f"`{command_text}` on {platform.platform()}, Python {platform.python_version()}.\n\n"
        f"{describe(rows, repeat)}\n\n{render_table(modes)}\n\n"
        "cluster start s: master and both workers up and registered (once per run); session s: the "
        "first session of the mode (local[2]'s includes starting the driver's JVM, the cluster's "
        "reuses it and waits for both executors). Both modes have the same 2 cores: a difference is overhead "
        "(or the other processes on the machine), not scaling.\n\nEvery repetition:\n\n"
        f"{render_runs(modes)}\n"
    )


def rows_of(modes: list[Mode]) -> list[Row]:
    local, cluster = (next(m for m in modes if m.mode == name) for name in MODES)
    note = "same 2 cores in both modes: overhead or noise, not scaling; reported, no target"
    return [
        row(
            "spark_cluster",
            "bulk_load (two loads), two-worker standalone cluster vs local[2]",
            "rows/s",
            cluster.load.load_rows_per_s,
            local.load.load_rows_per_s,
            "Spark local[2]",
            None,
            f"{cluster.load.load_seconds:.2f} s vs {local.load.load_seconds:.2f} s; {note}",
        ),
        row(
            "spark_cluster",
            "full Spark compaction, two-worker standalone cluster vs local[2]",
            "rows/s",
            cluster.compaction.compaction_rows_per_s,
            local.compaction.compaction_rows_per_s,
            "Spark local[2]",
            None,
            f"{cluster.compaction.compaction_seconds:.2f} s vs {local.compaction.compaction_seconds:.2f} s, "
            f"{cluster.compaction.subcompactions} task(s) at the default max_subcompaction_bytes; {note}",
        ),
        row(
            "spark_cluster",
            "startup: cluster start + session with both executors, vs local[2] session",
            "s",
            cluster.startup_seconds + cluster.session_seconds,
            local.session_seconds,
            "Spark local[2]",
            None,
            f"cluster start {cluster.startup_seconds:.1f} s + session {cluster.session_seconds:.1f} s (the "
            "driver's JVM already up) vs local[2]'s first session, JVM start included; reported, no target",
        ),
    ]


def collect(options: Options) -> Outcome:
    """The ``spark_cluster`` benchmark of ``python -m benchmarks`` (written like ``suite.collect_s3``)."""
    rows, repeat = (QUICK_ROWS, 1) if options.quick else (ROWS, 2)
    modes = run(rows, repeat)
    setup = describe(rows, repeat)
    report = render(modes, command("spark_cluster", options), rows, repeat)
    return Outcome(rows_of(modes), setup, render_table(modes), report)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, RESULTS, quick=f"{QUICK_ROWS:,} rows, one repeat")
    parser.add_argument("--rows", type=int, default=None, help=f"rows of the first load (default {ROWS:,})")
    parser.add_argument("--repeat", type=int, default=None, help="runs per mode (best is kept)")
    args = parser.parse_args(argv)
    rows = args.rows or (QUICK_ROWS if args.quick else ROWS)
    repeat = args.repeat or (1 if args.quick else 2)
    modes = run(rows, repeat)
    publish(render(modes, command_line("benchmarks.bench_spark_cluster", argv), rows, repeat), output(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
