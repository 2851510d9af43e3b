"""The writer's peak memory while ingesting 1 GB of 100-byte values, against its options' budget.

Run: ``python -m benchmarks.bench_writer_memory`` (``--quick``: ~100 MB; ``--case NAME`` to pick
cases; ``--before DIR``: every case also against another checkout of slate_ops, e.g. one made with
``git archive <commit> slate_ops | tar -x -C DIR``).

Budget (default options): ``max_unflushed_bytes + block_cache_bytes + wal_buffer_bytes`` (1 GiB +
64 MiB + 4 MiB = 1092 MiB); target: the peak stays within 1.3x of it with a compactor running.

Method: every case runs in a fresh interpreter (``--child CASE``). It imports slate_ops and the
compactor, writes 1,000 rows to an L0 SST of another database (so lazily loaded modules, such as
pandas through pyarrow, are loaded), collects garbage, returns free heap to the OS
(``malloc_trim``) and records its RSS: the baseline, an idle interpreter with the imports loaded.
It then resets the kernel's peak-RSS counter (``5 > /proc/self/clear_refs``), opens a writer with
default ``DbOptions`` on a local directory store and ingests batches of 100 puts of 16-byte keys (a
bijective scramble of the row number: random order) and 100-byte values until ``--mb`` MB of values
are written, flushes the WAL and closes. ``VmHWM`` (the peak) and the baseline are both reported;
the figure is peak - baseline. A sampler thread records the writer's accounted memtable bytes
(mutable + frozen) and when L0 first holds ``l0_max_ssts`` SSTs, every 0.2 s.

Cases:

* ``compactor``: ``Db.open(..., compactor=compaction.embedded(CompactorOptions()))``, so the
  compactor's own memory (its merges) is in the same process and counted;
* ``compactor-process``: the same compactor with default options in a process of its own (as
  ``slate-ops compact`` or a Dagster job would run it): the writer's memory alone;
* ``stall``: no compactor, and twice the data (``--mb`` x 2: with 1 GB, L0 plus the memtables
  hold it all). L0 fills up to ``l0_max_ssts``, frozen memtables pile up to
  ``max_unflushed_bytes``, then writes wait; ``backpressure_timeout`` is 20 s instead of 5 min so
  the stalled writer gives up within the run (the peak is reached before the wait).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.memory import clear_refs, malloc_trim, status_kib
from benchmarks.reporting import argument_parser, markdown_table, output, publish

if TYPE_CHECKING:
    from benchmarks.suite import Options, Outcome

RESULTS = Path(__file__).parent / "results" / "writer_memory.md"
REPO = Path(__file__).resolve().parent.parent
DB_PATH = "ingest"
VALUE_SIZE = 100
BATCH = 100
TARGET_RATIO = 1.3
STALL_TIMEOUT_S = 20
STALL_FACTOR = 2  # the stall case offers twice the data: 1 GB alone does not fill max_unflushed_bytes
CASES = ("compactor", "compactor-process", "stall")
MiB = 1024 * 1024
_SCRAMBLE = 0x9E3779B97F4A7C15  # odd: i -> i * _SCRAMBLE mod 2**64 is a bijection
_MASK = (1 << 64) - 1


@dataclass(frozen=True)
class CaseResult:
    case: str
    code: str  # "this checkout" or the --before directory
    mb: int
    rows: int
    seconds: float  # ingest wall time, up to the end of the WAL flush (or the stall)
    baseline_kib: int
    peak_kib: int
    budget_bytes: int
    max_accounted_bytes: int  # memtables (mutable + frozen) as the writer accounts them, sampled
    stalled: str | None  # the BackpressureTimeoutError text, if the writer gave up
    l0_full_at_s: float | None  # when a frozen memtable first waited on a full L0 (sampled every 0.2 s)
    warning_after_s: float | None  # from then to the first stall warning
    warnings: int
    l0_ssts: int
    load: tuple[float, float, float]

    @property
    def peak_delta_mib(self) -> float:
        return (self.peak_kib - self.baseline_kib) / 1024

    @property
    def budget_mib(self) -> float:
        return self.budget_bytes / MiB

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.rows * VALUE_SIZE / 1e6 / self.seconds if self.seconds > 0 else 0.0


# --- the child: one case in a fresh interpreter -----------------------------------------------------


class _StallLog:
    """Records the writer's stall warnings (logger ``slate_ops.engine.flusher``) and when the first came."""

    def __init__(self) -> None:
        import logging

        self.times: list[float] = []
        self.messages: list[str] = []
        handler = logging.Handler()
        handler.emit = self._emit  # type: ignore[method-assign]
        handler.setLevel(logging.WARNING)
        logging.getLogger("slate_ops.engine.flusher").addHandler(handler)

    def _emit(self, record: Any) -> None:
        if " stall: L0 holds " in record.getMessage():
            self.times.append(time.monotonic())
            self.messages.append(record.getMessage())


def _accounted(db: Any) -> int:
    """The writer's accounted memtable bytes."""
    return int(db.unflushed_bytes)


def child(case: str, mb: int, root: Path, code: str) -> CaseResult:
    import gc
    from datetime import timedelta

    from slate_ops.compaction import CompactorOptions, embedded
    from slate_ops.engine import Db, DbOptions, WriteBatch
    from slate_ops.errors import BackpressureTimeoutError
    from slate_ops.objstore import LocalStore

    stall_log = _StallLog()
    pool = os.urandom(1 << 20)
    with Db.open("warm-up", LocalStore(root)) as warm:  # lazy imports (pandas via pyarrow), threads
        for i in range(1000):
            warm.put(b"%06d" % i, pool[i : i + VALUE_SIZE])
        warm.flush_memtable()
    gc.collect()
    malloc_trim()
    baseline = status_kib("self", "VmRSS")
    if not clear_refs("self"):
        raise SystemExit("this benchmark needs /proc/self/clear_refs (Linux)")

    compactor_process: subprocess.Popen[str] | None = None
    if case == "compactor":
        options = DbOptions()
        db = Db.open(DB_PATH, LocalStore(root), options, compactor=embedded(CompactorOptions()))
    elif case == "compactor-process":
        options = DbOptions()
        db = Db.open(DB_PATH, LocalStore(root), options)
        compactor_process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_writer_memory", "--compact", str(root)],
            cwd=os.getcwd(),  # the same slate_ops as this process (see run_case)
            stdin=subprocess.PIPE,
            text=True,
        )
    else:
        options = DbOptions(backpressure_timeout=timedelta(seconds=STALL_TIMEOUT_S))
        db = Db.open(DB_PATH, LocalStore(root), options)
    budget = options.max_unflushed_bytes + options.block_cache_bytes + options.wal_buffer_bytes

    accounted = [0]
    l0_full: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            accounted[0] = max(accounted[0], _accounted(db))
            if not l0_full and db.frozen_memtables and len(db.manifest.l0) >= options.l0_max_ssts:
                l0_full.append(time.monotonic())  # a frozen memtable waits for L0 room

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    if case == "stall":
        mb *= STALL_FACTOR
    rows = mb * 1_000_000 // VALUE_SIZE
    stalled: str | None = None
    written = 0
    started = time.monotonic()
    start = time.perf_counter()
    try:
        for first in range(0, rows, BATCH):
            batch = WriteBatch()
            for i in range(first, min(first + BATCH, rows)):
                h = (i * _SCRAMBLE) & _MASK
                offset = h % ((1 << 20) - VALUE_SIZE)
                batch.put(b"%016x" % h, pool[offset : offset + VALUE_SIZE])
            db.write(batch)
            written += len(batch)
        db.flush()
    except BackpressureTimeoutError as error:
        stalled = str(error)
    seconds = time.perf_counter() - start
    accounted[0] = max(accounted[0], _accounted(db))
    l0 = len(db.manifest.l0)
    db.close()
    if compactor_process is not None:
        compactor_process.communicate("")  # closing its stdin stops it
    done.set()
    sampler.join()
    peak = status_kib("self", "VmHWM")
    first_warning = stall_log.times[0] if stall_log.times else None
    warning_after = None
    if first_warning is not None and l0_full:
        warning_after = max(0.0, first_warning - l0_full[0])
    load = os.getloadavg()
    return CaseResult(
        case,
        code,
        mb,
        written,
        seconds,
        baseline,
        peak,
        budget,
        accounted[0],
        stalled,
        None if not l0_full else l0_full[0] - started,
        warning_after,
        len(stall_log.times),
        l0,
        (round(load[0], 2), round(load[1], 2), round(load[2], 2)),
    )


# --- the parent -------------------------------------------------------------------------------------


def run_case(case: str, mb: int, before: Path | None = None) -> CaseResult:
    """Run ``case`` in a fresh interpreter (against ``before``'s slate_ops if given)."""
    env = dict(os.environ)
    code, cwd = "this checkout", REPO
    if before is not None:  # ``-m`` puts the working directory first on sys.path: run from there
        env["PYTHONPATH"] = os.pathsep.join([str(before), str(REPO)])
        code, cwd = str(before), before
    with tempfile.TemporaryDirectory(prefix="slate-bench-writer-memory-") as name:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.bench_writer_memory",
                "--child",
                case,
                "--mb",
                str(mb),
                "--dir",
                name,
                "--code",
                code,
            ],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"case {case} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return CaseResult(**json.loads(done.stdout.strip().splitlines()[-1]))


def run(mb: int, before: Path | None = None, progress: Any = lambda _: None) -> list[CaseResult]:
    results = []
    for case in CASES:
        progress(f"{case}: ingesting {mb} MB of {VALUE_SIZE}-byte values")
        results.append(run_case(case, mb))
        if before is not None:
            progress(f"{case}: the same against {before}")
            results.append(run_case(case, mb, before))
    return results


def compact_until_stdin_closes(root: Path) -> None:
    """The ``compactor-process`` case's compactor: default options, in its own process."""
    from slate_ops.compaction import Compactor, CompactorOptions
    from slate_ops.objstore import LocalStore

    compactor = Compactor(DB_PATH, LocalStore(root), CompactorOptions()).start()
    sys.stdin.read()
    compactor.close()


CASE_TEXT = {
    "compactor": "compactor running (embedded, same process)",
    "compactor-process": "compactor running (own process)",
    "stall": "no compactor (stall case)",
}


def _case_text(r: CaseResult) -> str:
    return CASE_TEXT[r.case]


def render(results: list[CaseResult]) -> str:
    rows = [
        [
            _case_text(r),
            r.code,
            f"{r.rows * VALUE_SIZE / 1e6:,.0f}",
            f"{r.peak_delta_mib:,.0f}",
            f"{r.baseline_kib / 1024:,.0f}",
            f"{r.budget_mib:,.0f}",
            f"{r.peak_delta_mib / r.budget_mib:.2f}x",
            f"{r.max_accounted_bytes / MiB:,.0f}",
            f"{r.rows_per_s:,.0f} ({r.mb_per_s:.1f} MB/s)",
            "-" if r.stalled is None else "stalled",
            "-" if r.l0_full_at_s is None else f"{r.l0_full_at_s:.0f} s",
            "-" if r.warning_after_s is None else f"{r.warning_after_s:.1f} s ({r.warnings})",
            r.l0_ssts,
            " ".join(f"{x:g}" for x in r.load),
        ]
        for r in results
    ]
    return markdown_table(
        [
            "case",
            "code",
            "MB ingested",
            "peak RSS - baseline (MiB)",
            "baseline RSS (MiB)",
            "budget (MiB)",
            "peak / budget",
            "max accounted memtables (MiB)",
            "ingest rate (rows/s)",
            "stall",
            "flush waits on L0 from",
            "stall warning after (count)",
            "L0 SSTs at end",
            "load avg",
        ],
        rows,
        "llrrrrrrrlrrrl",
    )


def _size(mb: int) -> str:
    return f"{mb / 1000:g} GB" if mb >= 1000 else f"{mb} MB"


def collect(options: Options) -> Outcome:
    """The suite's collector (``benchmarks/suite.py`` style): summary rows, doc table, report."""
    from benchmarks.suite import Outcome, Target, _progress, command, row

    mb = 100 if options.quick else 1000
    results = run(mb, progress=_progress)
    by_case = {r.case: r for r in results}
    size = _size(mb)
    budget_label = "budget: max_unflushed + block cache + WAL buffer"
    rows = []
    for case, what, target in (
        ("compactor", "compactor running", True),
        ("compactor-process", "compactor running in its own process (the writer alone)", True),
        ("stall", "no compactor (stall case)", False),
    ):
        r = by_case[case]
        note = f"peak - baseline (baseline RSS {r.baseline_kib / 1024:.0f} MiB); {r.rows_per_s:,.0f} rows/s"
        if case == "stall":
            note += (
                f"; backpressure_timeout {STALL_TIMEOUT_S} s instead of 5 min so the stalled writer gives "
                f"up in the run; {'stalled' if r.stalled else 'did not stall'}; reported"
            )
        rows.append(
            row(
                "writer_memory",
                f"writer peak RSS, {_size(r.mb)} of 100-byte values, default options, {what}",
                "MiB",
                r.peak_delta_mib,
                r.budget_mib,
                budget_label,
                Target("ratio", "<=", TARGET_RATIO) if target else None,
                note,
            )
        )
    rows.append(
        row(
            "writer_memory",
            f"ingest rate, {size} of 100-byte values in batches of {BATCH}, compactor running",
            "rows/s",
            by_case["compactor"].rows_per_s,
            note="reported",
        )
    )
    setup = (
        f"{mb:,} MB of 100-byte values ({mb * STALL_FACTOR:,} MB in the stall case; 16-byte keys in random "
        f"order, batches of {BATCH}) ingested by a writer with default DbOptions on a local directory store, "
        "each case in a fresh interpreter; "
        "peak RSS (VmHWM after a clear_refs reset) minus the RSS of the idle interpreter with the imports "
        "loaded."
    )
    table = render(results)
    head = f"# Writer memory (benchmarks/bench_writer_memory.py)\n\n`{command('writer_memory', options)}`"
    return Outcome(rows, setup, table, f"{head}\n\n{setup}\n\n{table}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, RESULTS, quick="~100 MB instead of 1 GB")
    parser.add_argument("--before", type=Path, help="also run every case against this slate_ops checkout")
    parser.add_argument("--case", choices=CASES, action="append", help="run only this case (repeatable)")
    parser.add_argument("--mb", type=int, help="MB of values to ingest (overrides --quick)")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--code", default="this checkout", help=argparse.SUPPRESS)
    parser.add_argument("--compact", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compact is not None:
        compact_until_stdin_closes(args.compact)
        return 0
    mb = args.mb or (100 if args.quick else 1000)
    if args.child is not None:
        print(json.dumps(asdict(child(args.child, mb, args.dir, args.code))))
        return 0
    results = []
    for case in args.case or CASES:
        results.append(run_case(case, mb))
        print(render(results[-1:]), file=sys.stderr)
        if args.before is not None:
            results.append(run_case(case, mb, args.before))
            print(render(results[-1:]), file=sys.stderr)
    publish(render(results) + "\n", output(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
