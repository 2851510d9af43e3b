"""Spark on ``local[2]`` vs a two-worker standalone cluster: bulk load and compaction on moto S3.

Run: ``python -m benchmarks.bench_spark_cluster [--quick] [--rows N] [--repeat N]``.

Method
------
* One process, one moto S3 server (``ThreadedMotoServer`` on loopback); the S3 credentials reach
  the tasks only through the session's ``spark.slate_ops.s3.*`` settings, in both modes.
* ``local[2]``: :func:`slate_ops.spark.local_spark_session`. ``cluster``: a master and two workers
  of one core and 1 GiB each started from PySpark's ``spark-class``
  (:func:`slate_ops.spark.cluster.start_standalone_cluster`, no ``AWS_*`` in their environment),
  and a session on that master; the timing starts once both executors have registered. The
  startup itself (daemons registered, then session and executors) is reported separately.
* Per repetition, in a fresh database: ``bulk_load`` of ``rows`` generated rows (128 B: the input
  of ``bench_bulk_load.py``, computed by Spark), then a second ``bulk_load`` rewriting every other
  key (``rows / 2``), timed together (rows/s = 1.5 x rows / seconds); then a full Spark compaction
  of the four L0 SSTs (rows/s = rows in / seconds). The compaction uses
  ``max_subcompaction_bytes`` = 8 MiB (default 256 MiB), so that a few tens of MB become several
  tasks and both executors work; everything else is default. An untimed warm-up load and
  compaction of 1 % of the rows first starts the Python workers. Best of ``--repeat`` (default 2).
* This machine has 2 cores for the driver, moto, both executors and their Python workers: the
  cluster cannot be faster than ``local[2]`` here. The ratio shows what the cluster's extra hops
  cost (separate executor JVMs, task and result transfer over RPC), not how it scales.
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
MiB = 1024 * 1024
COMPACTION = CompactorOptions(max_subcompaction_bytes=8 * MiB)
MODES = ("local[2]", "cluster")


@dataclass(frozen=True)
class Run:
    """One repetition: the two loads and the compaction."""

    mode: str
    load_rows: int
    load_seconds: float
    compaction_rows: int
    compaction_seconds: float
    subcompactions: int

    @property
    def load_rows_per_s(self) -> float:
        return self.load_rows / self.load_seconds

    @property
    def compaction_rows_per_s(self) -> float:
        return self.compaction_rows / self.compaction_seconds


@dataclass(frozen=True)
class Mode:
    """A mode's best runs and what starting it cost."""

    mode: str
    load: Run
    compaction: Run
    startup_seconds: float
    """Cluster: daemons started and both workers registered; both: session up, executors registered."""
    session_seconds: float
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]


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
def session(mode: str, work: Path) -> Iterator[tuple[SparkSession, float, float]]:
    """The mode's session with the S3 credentials in its settings, its executors registered:
    (session, cluster startup seconds, session seconds); everything stopped afterwards."""
    settings = {**S3Credentials(**KEYS).spark_conf(), "spark.app.name": f"slate_ops-bench-{mode}"}
    if mode == "local[2]":
        started = time.perf_counter()
        spark = local_spark_session("local[2]", config=settings)
        try:
            yield spark, 0.0, time.perf_counter() - started
        finally:
            spark.stop()
        return
    started = time.perf_counter()
    with standalone_cluster(2, cores=1, memory="1g", work_dir=work) as cluster:
        startup = time.perf_counter() - started
        started = time.perf_counter()
        spark = local_spark_session(cluster.master_url, config=settings)
        try:
            wait_for_executors(spark, 2)
            yield spark, startup, time.perf_counter() - started
        finally:
            spark.stop()


def measure(mode: str, url: str, rows: int, repeat: int, work: Path) -> Mode:
    """Best of ``repeat`` runs of :func:`load_and_compact` on ``mode`` after an untimed warm-up."""
    before = os.getloadavg()
    with session(mode, work) as (spark, startup, session_seconds):
        load_and_compact(spark, url, f"{mode}-warmup", max(rows // 100, 1000))
        runs = []
        for i in range(repeat):
            load_s, compaction_s, subcompactions = load_and_compact(spark, url, f"{mode}-{i}", rows)
            runs.append(Run(mode, rows + rows // 2, load_s, rows + rows // 2, compaction_s, subcompactions))
            print(
                f"  {mode}: loads {load_s:.2f} s, compaction {compaction_s:.2f} s "
                f"({subcompactions} subcompactions)",
                file=sys.stderr,
                flush=True,
            )
    return Mode(
        mode,
        min(runs, key=lambda r: r.load_seconds),
        min(runs, key=lambda r: r.compaction_seconds),
        startup,
        session_seconds,
        before,
        os.getloadavg(),
    )


def run(rows: int, repeat: int) -> list[Mode]:
    """Both modes against one moto server (local[2] first)."""
    server, endpoint = start_moto()
    try:
        url = f"s3://{new_bucket(endpoint)}/bench?endpoint_url={endpoint}&region={REGION}"
        with tempfile.TemporaryDirectory(prefix="slate-bench-spark-cluster-") as work:
            return [measure(mode, url, rows, repeat, Path(work) / "cluster") for mode in MODES]
    finally:
        server.stop()


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
        "startup s",
        "load avg before",
        "load avg after",
    ]
    lines = [
        [
            m.mode,
            f"{m.load.load_seconds:.2f}",
            f"{m.load.load_rows_per_s:,.0f}",
            f"{m.compaction.compaction_seconds:.2f}",
            f"{m.compaction.compaction_rows_per_s:,.0f}",
            m.compaction.subcompactions,
            f"{m.startup_seconds + m.session_seconds:.1f}",
            _load(m.load_before),
            _load(m.load_after),
        ]
        for m in modes
    ]
    return markdown_table(header, lines, "lrrrrrrrr")


def describe(rows: int, repeat: int) -> str:
    return (
        f"{rows:,} generated rows of {ROW_BYTES} B ({rows * ROW_BYTES / 1e6:.1f} MB) bulk-loaded into a "
        f"fresh database on moto S3, then the first {rows // 2:,} keys again; a full Spark compaction "
        f"of the 1.5x rows (max_subcompaction_bytes 8 MiB, default 256 MiB, so both executors get "
        f"tasks); best of {repeat}; {os.cpu_count()} CPUs shared by driver, moto and executors."
    )


def render(modes: list[Mode], command_text: str, rows: int, repeat: int) -> str:
    return (
        "# Spark: local[2] vs a two-worker standalone cluster (benchmarks/bench_spark_cluster.py)\n\n"
        f"`{command_text}` on {platform.platform()}, Python {platform.python_version()}.\n\n"
        f"{describe(rows, repeat)}\n\n{render_table(modes)}\n\n"
        "startup s: local[2]: session and JVM; cluster: master and workers registered, then the "
        "session and both executors. On one 2-core machine the cluster cannot be faster: the "
        "ratio is the overhead of separate executors, not scaling.\n"
    )


def rows_of(modes: list[Mode]) -> list[Row]:
    local, cluster = (next(m for m in modes if m.mode == name) for name in MODES)
    note = "same 2-core machine: overhead, not scaling; reported, no target"
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
            f"{cluster.compaction.subcompactions} tasks; max_subcompaction_bytes 8 MiB (default 256 MiB) "
            f"so both executors get tasks; {note}",
        ),
        row(
            "spark_cluster",
            "startup: cluster registered + session with both executors, vs local[2] session",
            "s",
            cluster.startup_seconds + cluster.session_seconds,
            local.session_seconds,
            "Spark local[2]",
            None,
            "reported, no target",
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
