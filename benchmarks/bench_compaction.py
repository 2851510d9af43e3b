"""Compaction throughput: local and Spark executors against the raw Arrow limit (docs/design/spark.md).

Run: ``python -m benchmarks.bench_compaction [--quick] [--no-spark]``.

Targets: LocalExecutor >= 100 MB/s and >= 0.5x the raw limit; Spark ``local[2]`` >= 1.6x ``local[1]``.

Method
------
* Inputs: ``SSTS`` (8) L0 SSTs written with ``encode_sst`` straight into a local store, plus an
  initial manifest listing them (newest first). Rows are 128 bytes: 16-byte random keys and
  112-byte values (56 random bytes + 56 bytes of a repeated pattern, so lz4 has something to do).
  Each SST holds distinct keys drawn from one key universe sized so that ~25 % of all input rows
  are shadowed by a newer version; 2 % of the rows are tombstones. Default ~16 MB of rows per SST
  (128 MB in all); ``--quick`` uses ~2 MB per SST and writes no results file.
* Each compaction run gets a fresh copy of the database made of hard links (inputs are immutable,
  every store write publishes a new inode), then ``Compactor(...).run_once()`` compacts all L0 SSTs
  into one sorted run: planning (reading every SST's index), the executor, the manifest commit.
  Throughput is stored input bytes (the SST files) / wall time of ``run_once``. Each configuration
  runs ``--repeat`` times (default 3); the best time is reported. Inputs stay in the page cache.
* Raw limit, single thread, no slate_ops compaction logic: ``SstReader.read_table`` of every input,
  ``concat_tables``, ``sort_by`` (key asc, seq desc), then ``encode_sst`` + ``put`` of outputs of
  ``TARGET_SST_BYTES`` of rows. It keeps every row (no dedup), so it writes more than a compaction.
* Spark: a fresh session for each (master, subcompaction size), started before timing; an untimed
  warm-up compaction at that size starts the Python workers and their imports, so the times exclude
  the JVM start and the workers' first imports.
* Peak memory, the largest over the repeats: before each run, freed memory is returned to the OS
  (``gc.collect``, Arrow's ``release_unused``, glibc's ``malloc_trim``) and the kernel's peak-RSS
  counter is reset (``5`` > ``/proc/<pid>/clear_refs``) for this process and for every Spark Python
  worker (descendants of this process running ``pyspark.daemon``). "driver" is this process's
  ``VmHWM`` minus its ``VmRSS`` at the reset (for the local executor: all the work). "worker" is the
  largest absolute ``VmHWM`` of one Spark Python worker, interpreter and imports included (each
  worker runs one subcompaction at a time). The JVM is not measured (it moves no rows: tasks read
  and write the store themselves).
* Options: ``CompactorOptions()`` (outputs cut at its ``target_sst_bytes``, 64 MiB of rows) but for
  the subcompaction size: ``max_subcompaction_bytes`` = 16 MiB (the default: the main rows) and
  64 MiB (memory rows, not the default), to show that peak memory follows it.
"""

from __future__ import annotations

import gc
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
from ulid import ULID

from benchmarks.memory import clear_refs, malloc_trim, status_kib
from benchmarks.reporting import argument_parser, command_line, markdown_table, output, publish
from slate_ops.compaction import Compactor, CompactorOptions, Executor, LocalExecutor
from slate_ops.layout import sst_key
from slate_ops.manifest.model import CompactedSst, Manifest, SstView
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import LocalStore
from slate_ops.sst import KIND_TOMBSTONE, KIND_VALUE, SCHEMA, SstReader, encode_sst

RESULTS = Path(__file__).parent / "results" / "compaction.md"
DB_PATH = "bench"
SSTS = 8
KEY_BYTES = 16
VALUE_BYTES = 112
ROW_BYTES = KEY_BYTES + VALUE_BYTES
SHADOWED = 0.25  # target share of input rows shadowed by a newer version
TOMBSTONES = 0.02
MiB = 1024 * 1024
# The compactor's defaults (issue 23: every headline figure with default options).
TARGET_SST_BYTES = CompactorOptions().target_sst_bytes
MAIN_SUBCOMPACTION = CompactorOptions().max_subcompaction_bytes
LARGE_SUBCOMPACTION = 64 * MiB
TARGET_LOCAL_MB_S = 100.0
TARGET_LOCAL_VS_RAW = 0.5
TARGET_SPARK_SCALING = 1.6


# --- inputs -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """A database directory (under ``root``) whose L0 holds the generated SSTs."""

    root: Path
    ssts: tuple[CompactedSst, ...]  # newest first
    rows: int
    live_keys: int  # keys whose newest version is a value: the rows of a full compaction's output

    @property
    def stored_bytes(self) -> int:
        return sum(s.info.size_bytes for s in self.ssts)

    @property
    def logical_bytes(self) -> int:
        return self.rows * ROW_BYTES

    def object_keys(self) -> list[str]:
        return [sst_key(DB_PATH, s.id) for s in self.ssts]


def universe_size(rows_per_sst: int, ssts: int = SSTS, shadowed: float = SHADOWED) -> int:
    """Keys in the universe so that ``ssts`` draws of ``rows_per_sst`` leave ``shadowed`` rows shadowed.

    With a share ``x = rows_per_sst / U`` drawn each time, distinct keys are ``U * (1 - (1 - x)**ssts)``;
    solved for ``distinct = (1 - shadowed) * ssts * rows_per_sst`` by bisection on ``x``.
    """
    lo, hi = 1e-9, 1.0
    for _ in range(60):
        x = (lo + hi) / 2
        distinct_share = (1 - (1 - x) ** ssts) / (ssts * x)
        if distinct_share > 1 - shadowed:
            lo = x
        else:
            hi = x
    return max(rows_per_sst, round(rows_per_sst / lo))


def _binary(matrix: np.ndarray) -> pa.Array:
    """Rows of a C-contiguous uint8 matrix as a ``binary`` array."""
    n, width = matrix.shape
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, pa.py_buffer(matrix.tobytes())])
    return fixed.cast(pa.binary())


def _values(matrix: np.ndarray, present: np.ndarray) -> pa.Array:
    """A ``binary`` array: row ``i`` of ``matrix`` where ``present[i]``, else ``b""`` (tombstones)."""
    lengths = np.where(present, matrix.shape[1], 0).astype(np.int32)
    offsets = np.concatenate([np.zeros(1, dtype=np.int32), np.cumsum(lengths, dtype=np.int32)])
    data = np.ascontiguousarray(matrix[present]).tobytes()
    return pa.BinaryArray.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)]
    )


def build_inputs(root: Path, mb_per_sst: float, seed: int = 7) -> Inputs:
    """Write ``SSTS`` overlapping L0 SSTs of ~``mb_per_sst`` MB of rows and a manifest listing them."""
    rng = np.random.default_rng(seed)
    rows_per_sst = max(16, int(mb_per_sst * 1e6 / ROW_BYTES))
    universe = universe_size(rows_per_sst)
    # Sorted, unique keys: a sorted distinct 8-byte prefix, then 8 random bytes.
    prefixes = np.unique(rng.integers(0, 2**63, size=universe + universe // 100 + 16, dtype=np.uint64))
    prefixes = prefixes[rng.permutation(len(prefixes))[:universe]]
    prefixes.sort()
    key_matrix = np.empty((universe, KEY_BYTES), dtype=np.uint8)
    key_matrix[:, :8] = prefixes.astype(">u8").view(np.uint8).reshape(universe, 8)
    key_matrix[:, 8:] = rng.integers(0, 256, size=(universe, 8), dtype=np.uint8)
    all_keys = _binary(key_matrix)

    store = LocalStore(root)
    ssts: list[CompactedSst] = []
    newest_kind = np.full(universe, -1, dtype=np.int8)  # newest version's kind of each key
    seq = 0
    for _ in range(SSTS):  # oldest first
        chosen = np.sort(rng.choice(universe, size=rows_per_sst, replace=False))
        kinds = np.where(rng.random(rows_per_sst) < TOMBSTONES, KIND_TOMBSTONE, KIND_VALUE).astype(np.uint8)
        values = np.empty((rows_per_sst, VALUE_BYTES), dtype=np.uint8)
        half = VALUE_BYTES // 2
        values[:, :half] = rng.integers(0, 256, size=(rows_per_sst, half), dtype=np.uint8)
        values[:, half:] = np.resize(np.frombuffer(b"slate_ops-", dtype=np.uint8), VALUE_BYTES - half)
        value_array = _values(values, kinds == KIND_VALUE)
        seqs = np.arange(seq + 1, seq + rows_per_sst + 1, dtype=np.uint64)
        seq += rows_per_sst
        table = pa.Table.from_arrays(
            [all_keys.take(pa.array(chosen)), pa.array(seqs), pa.array(kinds), value_array],
            schema=SCHEMA,
        )
        data, info = encode_sst(table)
        sst_id = ULID()
        store.put(sst_key(DB_PATH, sst_id), data)
        ssts.append(CompactedSst(sst_id, info))
        newest_kind[chosen] = kinds
    newest_first = tuple(reversed(ssts))
    manifest = Manifest(
        initialized=True,
        ssts=newest_first,
        l0=tuple(SstView(ULID(), s.id) for s in newest_first),
        last_l0_seq=seq,
    )
    ManifestStore(store, DB_PATH).create_initial(manifest)
    live = int(np.count_nonzero(newest_kind == KIND_VALUE))
    return Inputs(root, newest_first, SSTS * rows_per_sst, live)


def fresh_copy(inputs: Inputs, workdir: Path) -> LocalStore:
    """A new store holding the input database, made of hard links (instant, no extra disk)."""
    target = Path(tempfile.mkdtemp(prefix="run-", dir=workdir))
    shutil.rmtree(target)
    shutil.copytree(inputs.root, target, copy_function=os.link)
    return LocalStore(target)


# --- memory -----------------------------------------------------------------------------------------


def spark_worker_pids() -> list[int]:
    """Descendants of this process whose command line runs ``pyspark.daemon`` (PySpark's workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    stack = [os.getpid()]
    while stack:
        for child in children.get(stack.pop(), []):
            stack.append(child)
            try:
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if b"pyspark.daemon" in cmdline or b"pyspark/daemon" in cmdline:
                found.append(child)
    return sorted(found)


class Meter:
    """Peak RSS growth of this process and of each Spark Python worker during one run."""

    def __init__(self) -> None:
        self.available = clear_refs("self")
        self._driver_base = 0

    def reset(self) -> None:
        """Return freed memory to the OS (Python, Arrow's pool, glibc), then reset the peak counters."""
        gc.collect()
        pa.default_memory_pool().release_unused()
        malloc_trim()
        if not self.available:
            return
        clear_refs("self")
        self._driver_base = status_kib("self", "VmRSS")
        for pid in spark_worker_pids():
            clear_refs(pid)

    def read(self) -> tuple[int | None, int | None]:
        """(this process's peak growth KiB, largest absolute peak RSS KiB of a Spark worker or None)."""
        if not self.available:
            return None, None
        driver = max(0, status_kib("self", "VmHWM") - self._driver_base)
        peaks = [status_kib(pid, "VmHWM") for pid in spark_worker_pids()]
        return driver, max(peaks) if peaks else None


# --- runs -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    name: str
    executor: str
    subcompaction_bytes: int | None
    subcompactions: int
    input_bytes: int
    seconds: float
    rows_out: int
    driver_kib: int | None
    worker_kib: int | None

    @property
    def mb_per_s(self) -> float:
        return self.input_bytes / 1e6 / self.seconds if self.seconds > 0 else float("inf")


def raw_limit(inputs: Inputs, workdir: Path, meter: Meter, repeat: int) -> Result:
    """Read every input with ``read_table``, concat, sort, encode and put: no compaction logic."""
    best: tuple[float, int | None, int] | None = None
    driver_peak: int | None = None
    for _ in range(repeat):
        store = fresh_copy(inputs, workdir)
        meter.reset()
        started = time.perf_counter()
        tables = [
            SstReader.open(store, key, size=s.info.size_bytes).read_table()
            for key, s in zip(inputs.object_keys(), inputs.ssts, strict=True)
        ]
        table = pa.concat_tables(tables).sort_by([("key", "ascending"), ("seq", "descending")])
        del tables
        rows_per_output = max(1, TARGET_SST_BYTES // ROW_BYTES)
        for start in range(0, table.num_rows, rows_per_output):
            data, _ = encode_sst(table.slice(start, rows_per_output))
            store.put(sst_key(DB_PATH, ULID()), data)
        seconds = time.perf_counter() - started
        rows = table.num_rows
        del table
        driver, _ = meter.read()
        driver_peak = _max(driver_peak, driver)
        if best is None or seconds < best[0]:
            best = (seconds, driver, rows)
    assert best is not None
    return Result(
        "raw limit (read_table, sort, encode_sst)",
        "pyarrow",
        None,
        1,
        inputs.stored_bytes,
        best[0],
        best[2],
        best[1],
        None,
    )


def compact(
    name: str,
    executor: Executor,
    inputs: Inputs,
    workdir: Path,
    meter: Meter,
    subcompaction_bytes: int,
    repeat: int,
) -> Result:
    """Best of ``repeat`` full L0 compactions of fresh copies of the inputs."""
    # Default options but for the subcompaction size (the default one, MAIN_SUBCOMPACTION, for every
    # headline row); the default scheduler compacts all SSTS (8 = max_sources) L0 SSTs at once.
    options = CompactorOptions(max_subcompaction_bytes=subcompaction_bytes)
    best: Result | None = None
    driver_peak: int | None = None
    worker_peak: int | None = None
    for _ in range(repeat):
        store = fresh_copy(inputs, workdir)
        compactor = Compactor(DB_PATH, store, options, executor)
        meter.reset()
        started = time.perf_counter()
        report = compactor.run_once()
        seconds = time.perf_counter() - started
        driver, worker = meter.read()
        compactor.close()  # untimed: its "completed" record lands before the copy is deleted
        if report is None or report.rows_out != inputs.live_keys:
            raise AssertionError(
                f"{name}: expected {inputs.live_keys} rows out, got {report and report.rows_out}"
            )
        result = Result(
            name, executor.name, subcompaction_bytes, report.subcompactions, inputs.stored_bytes, seconds,
            report.rows_out, driver, worker,
        )  # fmt: skip
        driver_peak = _max(driver_peak, driver)
        worker_peak = _max(worker_peak, worker)
        if best is None or result.seconds < best.seconds:
            best = result
    assert best is not None
    return replace(best, driver_kib=driver_peak, worker_kib=worker_peak)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def run_local(
    inputs: Inputs, workdir: Path, meter: Meter, repeat: int, progress: Callable[[str], None] = print
) -> list[Result]:
    """The raw limit and the local executor (1 and 2 threads) at both subcompaction sizes."""
    results = [raw_limit(inputs, workdir, meter, repeat)]
    progress(_line(results[-1]))
    for size in (MAIN_SUBCOMPACTION, LARGE_SUBCOMPACTION):
        for threads in (1, 2):
            name = f"LocalExecutor(threads={threads})"
            results.append(compact(name, LocalExecutor(threads), inputs, workdir, meter, size, repeat))
            progress(_line(results[-1]))
    return results


def run_spark(
    inputs: Inputs, workdir: Path, meter: Meter, repeat: int, progress: Callable[[str], None] = print
) -> list[Result]:
    """SparkExecutor on fresh ``local[1]`` and ``local[2]`` sessions (JVM start and warm-up untimed)."""
    from slate_ops.spark import SparkExecutor, local_spark_session

    results: list[Result] = []
    runs = [
        ("local[1]", MAIN_SUBCOMPACTION),
        ("local[2]", MAIN_SUBCOMPACTION),
        ("local[2]", LARGE_SUBCOMPACTION),
    ]
    for master, size in runs:
        # A fresh session per run: its Python workers hold only what this subcompaction size needs.
        spark = local_spark_session(master, "slate_ops-bench")
        try:
            executor = SparkExecutor(spark)
            compact("warm-up", executor, inputs, workdir, Meter(), size, 1)
            results.append(compact(f"SparkExecutor {master}", executor, inputs, workdir, meter, size, repeat))
            progress(_line(results[-1]))
        finally:
            spark.stop()
    return results


# --- report -----------------------------------------------------------------------------------------


def _mib(kib: int | None) -> str:
    return "n/a" if kib is None else f"{kib / 1024:.0f}"


def _line(r: Result) -> str:
    size = "-" if r.subcompaction_bytes is None else f"{r.subcompaction_bytes // MiB} MiB"
    return f"  {r.name:<42} {size:>7} {r.seconds:6.2f}s {r.mb_per_s:7.1f} MB/s"


def render_table(results: Sequence[Result]) -> str:
    raw = next(r for r in results if r.executor == "pyarrow")
    rows = [
        [
            r.name,
            "-" if r.subcompaction_bytes is None else f"{r.subcompaction_bytes // MiB} MiB",
            r.subcompactions,
            f"{r.seconds:.2f}",
            f"{r.mb_per_s:.1f}",
            "1.00" if r is raw else f"{r.mb_per_s / raw.mb_per_s:.2f}",
            _mib(r.driver_kib),
            _mib(r.worker_kib),
        ]
        for r in results
    ]
    header = [
        "run", "max_subcompaction_bytes", "subcompactions", "seconds", "input MB/s", "vs raw",
        "peak driver MiB", "peak worker MiB",
    ]  # fmt: skip
    return markdown_table(header, rows, "lrrrrrrr")


def _find(results: Sequence[Result], name: str, size: int) -> Result | None:
    return next((r for r in results if r.name == name and r.subcompaction_bytes == size), None)


def render_targets(results: Sequence[Result]) -> str:
    raw = next(r for r in results if r.executor == "pyarrow")
    rows: list[list[str]] = []
    for threads in (1, 2):
        local = _find(results, f"LocalExecutor(threads={threads})", MAIN_SUBCOMPACTION)
        if local is not None:
            rows.append(
                [
                    f"LocalExecutor(threads={threads}) >= {TARGET_LOCAL_MB_S:.0f} MB/s",
                    f"{local.mb_per_s:.1f} MB/s",
                    "yes" if local.mb_per_s >= TARGET_LOCAL_MB_S else "no",
                ]
            )
            ratio = local.mb_per_s / raw.mb_per_s
            rows.append(
                [
                    f"LocalExecutor(threads={threads}) / raw >= {TARGET_LOCAL_VS_RAW}",
                    f"{ratio:.2f}",
                    "yes" if ratio >= TARGET_LOCAL_VS_RAW else "no",
                ]
            )
    one = _find(results, "SparkExecutor local[1]", MAIN_SUBCOMPACTION)
    two = _find(results, "SparkExecutor local[2]", MAIN_SUBCOMPACTION)
    spark_target = f"Spark local[2] / local[1] >= {TARGET_SPARK_SCALING}"
    if one is not None and two is not None:
        scaling = two.mb_per_s / one.mb_per_s
        rows.append([spark_target, f"{scaling:.2f}", "yes" if scaling >= TARGET_SPARK_SCALING else "no"])
    else:
        rows.append([spark_target, "not run", "-"])
    return markdown_table(["target", "measured", "met"], rows, "lrc")


def render_report(inputs: Inputs, results: Sequence[Result], argv: str, meter: Meter) -> str:
    shadowed = 1 - inputs.live_keys / inputs.rows
    memory = (
        "kernel peak-RSS reset (`5` > /proc/<pid>/clear_refs) after returning freed memory to the OS; "
        "driver = VmHWM - VmRSS at the reset, worker = absolute VmHWM of the largest Spark Python worker "
        "(interpreter and imports included); largest over the repeats"
        if meter.available
        else "not measured (clear_refs not permitted)"
    )
    return "\n".join(
        [
            "# Compaction throughput",
            "",
            f"`{argv}` on {platform.node() or 'this machine'} ({os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}, pyarrow {pa.__version__}). Method: module docstring of "
            "`benchmarks/bench_compaction.py`.",
            "",
            f"Inputs: {SSTS} L0 SSTs, {inputs.rows:,} rows of {ROW_BYTES} B ({KEY_BYTES} B keys, "
            f"{VALUE_BYTES} B values), {inputs.logical_bytes / 1e6:.1f} MB of rows, "
            f"{inputs.stored_bytes / 1e6:.1f} MB stored; {inputs.live_keys:,} live keys out "
            f"({shadowed:.0%} of input rows shadowed or deleted). Outputs cut at "
            f"{TARGET_SST_BYTES // MiB} MiB. MB/s = stored input MB / wall time of `Compactor.run_once` "
            "(planning, executor, commit); best of the repeats. Peak memory: "
            f"{memory}. The JVM is not measured.",
            "",
            render_table(results),
            "",
            render_targets(results),
            "",
        ]
    )


@contextmanager
def _workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="slate-bench-compaction-") as name:
        yield Path(name)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, RESULTS, quick="~2 MB per SST, one repeat")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark executor")
    parser.add_argument(
        "--mb-per-sst", type=float, default=None, help="MB of rows per input SST (default 48)"
    )
    parser.add_argument("--repeat", type=int, default=None, help="runs per configuration (best is kept)")
    args = parser.parse_args(argv)
    # 48 MB per SST (274 MB stored in all): large enough that PySpark's fixed job and task costs
    # (~0.3 s + 40-80 ms per task) do not hide the scaling; 16 MB was measured too (docs/benchmarks.md).
    mb = args.mb_per_sst or (2.0 if args.quick else 48.0)
    repeat = args.repeat or (1 if args.quick else 3)
    meter = Meter()
    with _workdir() as workdir:
        started = time.perf_counter()
        inputs = build_inputs(workdir / "inputs", mb)
        print(
            f"inputs: {SSTS} SSTs, {inputs.rows:,} rows, {inputs.stored_bytes / 1e6:.1f} MB stored, "
            f"built in {time.perf_counter() - started:.1f}s"
        )
        results = run_local(inputs, workdir, meter, repeat)
        if not args.no_spark:
            results += run_spark(inputs, workdir, meter, repeat)
    report = render_report(inputs, results, command_line("benchmarks.bench_compaction", argv), meter)
    publish(report, output(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
