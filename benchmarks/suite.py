"""The benchmarks behind ``python -m benchmarks``: one collector per benchmark, and its summary rows.

Each collector runs one benchmark script's measuring code (the same functions its own ``main``
uses), at full or ``--quick`` sizes, and returns an :class:`Outcome`: the machine-readable summary
rows (:class:`Row`: ours, reference, ratio, target, met), the generated Markdown for the benchmark's
section of docs/benchmarks.md, and the full report that the script would write to
``benchmarks/results/<name>.md``. ``run_all.py`` runs each collector in its own process and writes
``benchmarks/results/<name>.json``.

The benchmark modules are imported only inside their collector, so a run of one benchmark imports
neither Spark nor SlateDB unless it needs them.
"""

from __future__ import annotations

import importlib.metadata
import math
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# --- rows -------------------------------------------------------------------------------------------

Op = Literal[">=", "<=", "<"]
_OP_TEXT: dict[str, str] = {">=": "≥", "<=": "≤", "<": "<"}


@dataclass(frozen=True)
class Target:
    """A target on ``ours`` (in the row's unit) or on ``ratio`` (ours / reference)."""

    on: Literal["ours", "ratio"]
    op: Op
    value: float

    def holds(self, measured: float) -> bool:
        if self.op == ">=":
            return measured >= self.value
        if self.op == "<=":
            return measured <= self.value
        return measured < self.value

    def text(self, unit: str) -> str:
        if self.on == "ratio":
            return f"{_OP_TEXT[self.op]} {self.value:g}x"
        return f"{_OP_TEXT[self.op]} {format_value(self.value, unit)}"


@dataclass(frozen=True)
class Row:
    """One summary row; ``ratio`` is ours / reference; ``met`` is None where there is no target."""

    benchmark: str
    metric: str
    unit: str
    ours: float | None
    reference: float | None
    reference_label: str | None
    ratio: float | None
    target: Target | None
    met: bool | None
    note: str | None = None
    load: float | None = None
    """The 1-minute load average when this row's own measurement started, where the benchmark took
    it; otherwise the summary shows its benchmark's load at start and end
    (:func:`benchmarks.reporting.load_cell`)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "metric": self.metric,
            "unit": self.unit,
            "ours": self.ours,
            "reference": self.reference,
            "reference_label": self.reference_label,
            "ratio": None if self.ratio is None else round(self.ratio, 4),
            "target": None if self.target is None else self.target.text(self.unit),
            "target_on": None if self.target is None else self.target.on,
            "target_op": None if self.target is None else self.target.op,
            "target_value": None if self.target is None else self.target.value,
            "met": self.met,
            "note": self.note,
            "load": self.load,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Row:
        target = None
        if data.get("target_on") is not None:
            target = Target(data["target_on"], data["target_op"], float(data["target_value"]))
        return Row(
            data["benchmark"],
            data["metric"],
            data["unit"],
            data["ours"],
            data["reference"],
            data.get("reference_label"),
            data["ratio"],
            target,
            data["met"],
            data.get("note"),
            data.get("load"),
        )


def row(
    benchmark: str,
    metric: str,
    unit: str,
    ours: float | None,
    reference: float | None = None,
    reference_label: str | None = None,
    target: Target | None = None,
    note: str | None = None,
    load: float | None = None,
) -> Row:
    """A row with its ratio and ``met`` computed (``met`` None when unmeasured or without target)."""
    ratio = None
    if ours is not None and reference is not None and reference != 0:
        ratio = ours / reference
    measured = None if target is None else (ours if target.on == "ours" else ratio)
    met = None if target is None or measured is None or math.isnan(measured) else target.holds(measured)
    return Row(benchmark, metric, unit, ours, reference, reference_label, ratio, target, met, note, load)


def format_value(value: float | None, unit: str) -> str:
    """``1,577,547 rows/s``, ``101.1 MB/s``, ``2 requests``, ``43.6 ms``."""
    if value is None:
        return "—"
    if (
        unit in ("requests", "objects")
        or (float(value).is_integer() and abs(value) < 1000)
        or abs(value) >= 1000
    ):
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit[:-1] if unit == 'requests' and value == 1 else unit}"


# --- outcome and options ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """What one invocation asked for."""

    quick: bool
    spark: bool  # run the parts that need a Spark session
    slatedb: bool  # run SlateDB's binding as the engine's reference


@dataclass
class Outcome:
    """What a collector returns. ``markdown`` goes into docs/benchmarks.md; ``report`` into results/."""

    rows: list[Row]
    setup: str  # sizes and settings of this run, one sentence
    markdown: str
    report: str
    skipped: list[str] = field(default_factory=list)
    details: dict[str, Any] | None = None


@dataclass(frozen=True)
class Benchmark:
    name: str
    title: str
    module: str  # in the benchmarks package: runs alone as ``python -m benchmarks.<module>``
    needs_spark: bool  # entirely: skipped by --no-spark
    collect: Callable[[Options], Outcome]


def command(name: str, options: Options) -> str:
    """The command that reruns benchmark ``name`` as this invocation ran it (for its report)."""
    return f"python -m benchmarks --only {name}" + (" --quick" if options.quick else "")


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


# --- collectors -------------------------------------------------------------------------------------


def collect_manifest_requests(options: Options) -> Outcome:
    from benchmarks import bench_manifest_requests as bench

    results = bench.run_all_stores()
    table = bench.render(results)
    rows: list[Row] = []
    for operation in dict.fromkeys(name for _, name, _, _ in results):
        per_store = {store: (counts, target) for store, name, counts, target in results if name == operation}
        totals = {store: sum(counts.values()) for store, (counts, _) in per_store.items()}
        target = max(t for _, t in per_store.values())
        same = len(set(totals.values())) == 1
        note = (
            "same on the memory and local stores"
            if same
            else ", ".join(f"{store} {total}" for store, total in totals.items())
        )
        if operation in bench.ISSUE_TARGETS:
            goal: Target | None = Target("ours", "<=", target)
        else:
            goal, note = None, f"{note}; expected {target}"
        rows.append(
            row("manifest_requests", operation, "requests", max(totals.values()), target=goal, note=note)
        )
    setup = (
        "Requests counted with `CountingStore` on the memory and the local directory store; one LIST call "
        "counts one request."
    )
    return Outcome(rows, setup, table, table + "\n")


def collect_manifest_codec(options: Options) -> Outcome:
    from benchmarks import bench_manifest_codec as bench

    runs = 5 if options.quick else 20
    result = bench.run(runs)
    rows = []
    for name, times, target in result.rows:
        median = sorted(times)[len(times) // 2]
        rows.append(
            row(
                "manifest_codec",
                f"{name} of a 10,000-SST manifest (best of {runs})",
                "ms",
                min(times),
                target=Target("ours", "<", target),
                note=f"median {median:.1f} ms",
            )
        )
    setup = f"{bench.describe(result)} {runs} timed runs of each; the best is judged."
    report = bench.render_report(result, command("manifest_codec", options))
    return Outcome(rows, setup, bench.render_table(result), report)


def collect_engine(options: Options) -> Outcome:
    from benchmarks import bench_engine as bench

    n, durable_n = (10_000, 20) if options.quick else (100_000, 100)
    skipped: list[str] = []
    sdb = bench.load_slatedb() if options.slatedb else None
    if sdb is None:
        skipped.append(
            "SlateDB's binding: "
            + ("--no-slatedb" if not options.slatedb else "the slatedb package is not installed")
        )
    version = package_version("slatedb") if sdb is not None else None
    meter = bench.Meter()
    results = bench.run(n, durable_n, sdb, meter, progress=_progress)
    label = f"slatedb {version}" if version else None
    rows = []
    for r in results:
        unit = "rows/s" if r.phase == bench.SCAN else "ops/s"
        goal = bench.TARGETS.get(r.phase)
        note = "; ".join(r.notes) or None
        if r.phase == bench.SCAN and r.ours is not None:
            theirs = f", SlateDB {r.theirs.mb_per_s:.1f} MB/s" if r.theirs is not None else ""
            note = f"ours {r.ours.mb_per_s:.1f} MB/s{theirs}"
        rows.append(
            row(
                "engine",
                f"{r.phase} (N={r.n:,})",
                unit,
                None if r.ours is None else r.ours.ops_per_s,
                None if r.theirs is None else r.theirs.ops_per_s,
                label,
                None if goal is None else Target("ratio", ">=", goal),
                note,
            )
        )
    ours_peaks = {r.phase: r.ours.peak_rss_delta_kib for r in results if r.ours is not None}
    theirs_peaks = {r.phase: r.theirs.peak_rss_delta_kib for r in results if r.theirs is not None}
    if ours_peaks:
        ours_phase = max(ours_peaks, key=lambda p: ours_peaks[p])
        note = f"ours in {ours_phase}"
        theirs_mib = None
        if theirs_peaks:
            theirs_phase = max(theirs_peaks, key=lambda p: theirs_peaks[p])
            theirs_mib = theirs_peaks[theirs_phase] / 1024
            note += f", SlateDB in {theirs_phase}"
        rows.append(
            row(
                "engine",
                "peak RSS growth, largest phase",
                "MiB",
                ours_peaks[ours_phase] / 1024,
                theirs_mib,
                label,
                None,
                note + "; reported, no target",
            )
        )
    report = bench.render_report(results, version, meter.method, command("engine", options))
    theirs = f"SlateDB: slatedb {version} (PyPI binding)" if version else "SlateDB not run: ours only"
    setup = (
        f"N={n:,} keys of 16 B with 100 B values (await-durable row: N={durable_n}); local directory "
        f"store, one process, both engines on the same data; {theirs}. Peak memory: "
        + (
            "kernel peak-RSS reset (`5` > /proc/self/clear_refs), VmHWM - VmRSS."
            if meter.method == "clear_refs"
            else "ru_maxrss growth (a lower bound)."
        )
    )
    return Outcome(rows, setup, bench.render_table(results), report, skipped)


def collect_compaction(options: Options) -> Outcome:
    from benchmarks import bench_compaction as bench

    mb, repeat = (2.0, 1) if options.quick else (48.0, 3)
    meter = bench.Meter()
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="slate-bench-compaction-") as name:
        workdir = Path(name)
        inputs = bench.build_inputs(workdir / "inputs", mb)
        _progress(
            f"inputs: {bench.SSTS} SSTs, {inputs.rows:,} rows, {inputs.stored_bytes / 1e6:.1f} MB stored"
        )
        results = bench.run_local(inputs, workdir, meter, repeat, progress=_progress)
        if options.spark:
            results += bench.run_spark(inputs, workdir, meter, repeat, progress=_progress)
        else:
            skipped.append("SparkExecutor rows: --no-spark")
    raw = results[0]
    raw_label = "raw pyarrow limit"
    rows = []
    for threads, default in ((2, " (the default)"), (1, " (not the default)")):
        local = next(
            r
            for r in results
            if r.name == f"LocalExecutor(threads={threads})"
            and r.subcompaction_bytes == bench.MAIN_SUBCOMPACTION
        )
        what = f"LocalExecutor(threads={threads}){default}, input throughput"
        rows.append(
            row(
                "compaction",
                what,
                "MB/s",
                local.mb_per_s,
                target=Target("ours", ">=", bench.TARGET_LOCAL_MB_S),
            )
        )
        rows.append(
            row(
                "compaction",
                f"LocalExecutor(threads={threads}){default} vs the raw limit",
                "MB/s",
                local.mb_per_s,
                raw.mb_per_s,
                raw_label,
                Target("ratio", ">=", bench.TARGET_LOCAL_VS_RAW),
            )
        )
    spark = {
        r.name: r
        for r in results
        if r.executor != "pyarrow" and r.subcompaction_bytes == bench.MAIN_SUBCOMPACTION
    }
    one, two = spark.get("SparkExecutor local[1]"), spark.get("SparkExecutor local[2]")
    rows.append(
        row(
            "compaction",
            "SparkExecutor local[2] vs local[1]",
            "MB/s",
            None if two is None else two.mb_per_s,
            None if one is None else one.mb_per_s,
            "Spark local[1]",
            Target("ratio", ">=", bench.TARGET_SPARK_SCALING),
            None if options.spark else "not run (--no-spark)",
        )
    )
    default_local = next(
        r
        for r in results
        if r.name == "LocalExecutor(threads=2)" and r.subcompaction_bytes == bench.MAIN_SUBCOMPACTION
    )
    if default_local.driver_kib is not None and raw.driver_kib is not None:
        rows.append(
            row(
                "compaction",
                "peak memory, LocalExecutor(threads=2) at 16 MiB subcompactions",
                "MiB",
                default_local.driver_kib / 1024,
                raw.driver_kib / 1024,
                raw_label,
                None,
                "reported: bounded by max_subcompaction_bytes, not by the input",
            )
        )
    shadowed = 1 - inputs.live_keys / inputs.rows
    setup = (
        f"{bench.SSTS} L0 SSTs of ~{mb:g} MB of rows: {inputs.rows:,} rows of {bench.ROW_BYTES} B, "
        f"{inputs.stored_bytes / 1e6:.1f} MB stored, {shadowed:.0%} shadowed or deleted; best of {repeat}. "
        "MB/s = stored input MB / wall time of `Compactor.run_once`."
    )
    markdown = bench.render_table(results) + "\n\n" + bench.render_targets(results)
    return Outcome(
        rows,
        setup,
        markdown,
        bench.render_report(inputs, results, command("compaction", options), meter),
        skipped,
    )


def collect_gc(options: Options) -> Outcome:
    from benchmarks import bench_gc as bench

    rounds = 60 if options.quick else bench.ROUNDS
    results = {r.scenario: r for r in bench.run_scenarios(rounds)}
    budget = "budget of tests/gc/test_bench_gc.py"
    rows = []
    for scenario, result in results.items():
        extra = f"{result.objects} objects, {result.deleted} deleted"
        if scenario == "real run, all garbage a day old":
            rows.append(row("gc", scenario, "requests", result.total, note=extra))
            besides = result.total - result.counts.get("delete", 0)
            rows.append(
                row(
                    "gc",
                    "  … of which not a DELETE (one DELETE per deleted object)",
                    "requests",
                    besides,
                    target=Target("ours", "<=", 16),
                    note=budget,
                )
            )
            continue
        target = {"dry run, all garbage a day old": 10, "real run again (steady state)": 12}.get(scenario)
        rows.append(
            row(
                "gc",
                scenario,
                "requests",
                result.total,
                target=None if target is None else Target("ours", "<=", target),
                note=extra
                + (f"; {budget}" if target is not None else "; reported: one GET per young manifest"),
            )
        )
    polling = bench.polling_costs(rounds)
    for p in polling:
        ours, theirs = p.cost.per_day(p.cost.ours), p.cost.per_day(p.cost.slatedb_defaults)
        rows.append(
            row(
                "gc",
                f"requests per day of one database kept maintained, {p.database}",
                "requests/day",
                ours.requests,
                reference=theirs.requests,
                reference_label="SlateDB defaults",
                note=f"${p.cost.dollars_per_month:.2f} vs ${p.cost.slatedb_dollars_per_month:.2f} a month "
                "(S3 Standard); sensor polls + GC"
                + (" + 1 writer vs GC + compactor + 1 writer" if p.writers else " vs GC + compactor"),
            )
        )
    measured = list(results.values())
    return Outcome(
        rows,
        bench.describe(rounds),
        bench.table(measured) + "\n\n" + bench.polling_table(polling),
        bench.render_report(measured, rounds, polling),
    )


def collect_rescale(options: Options) -> Outcome:
    from benchmarks import bench_rescale as bench
    from slate_ops.objstore import LocalStore

    if options.quick:
        sizes, sst_mb, repeat = (1.0, 16.0), 4.0, 3
    else:
        sizes, sst_mb, repeat = bench.DEFAULT_SIZES_MB, bench.DEFAULT_SST_MB, 21
    with tempfile.TemporaryDirectory(prefix="bench-rescale-") as tmp:
        report = bench.run(LocalStore(tmp), sizes, sst_mb=sst_mb, repeat=repeat, warmup=1, progress=_progress)
    report["command"] = command("rescale", options)
    small, large = report["databases"][0], report["databases"][-1]
    reference = f"{small['label']} database"
    rows = []
    for name, op in report["operations"].items():
        by_size = op["by_size"]
        what = "split into 4" if name == "split" else "merge of 4"
        for measure, unit, key in (
            ("median time", "ms", "seconds_median"),
            ("requests", "requests", "total"),
        ):
            ours = (
                by_size[large["label"]]["requests"]["total"]
                if key == "total"
                else 1e3 * by_size[large["label"]][key]
            )
            theirs = (
                by_size[small["label"]]["requests"]["total"]
                if key == "total"
                else 1e3 * by_size[small["label"]][key]
            )
            note = f"{large['ssts']} vs {small['ssts']} SSTs"
            if key == "seconds_median":
                note += f"; CPU ratio {op['ratio_cpu']:.2f}x"
            rows.append(
                row(
                    "rescale",
                    f"{what}, {measure}, {large['label']} database",
                    unit,
                    ours,
                    theirs,
                    reference,
                    Target("ratio", "<=", bench.TARGET_RATIO),
                    note,
                )
            )
    setup = (
        f"Databases of {', '.join(d['label'] for d in report['databases'])} "
        f"({', '.join(str(d['ssts']) for d in report['databases'])} SSTs) on the local directory store; "
        f"split into {report['shards']} shards and merge back; median of {repeat} runs after a warm-up."
    )
    table = bench.table(report)
    return Outcome(
        rows, setup, table, f"# Rescaling: split and merge\n\n{setup}\n\n{table}\n", details=report
    )


def collect_bulk_load(options: Options) -> Outcome:
    from benchmarks import bench_bulk_load as bench

    rows_in, repeat = (100_000, 1) if options.quick else (bench.ROWS, 2)
    runs = []
    with tempfile.TemporaryDirectory(prefix="slate-bench-bulk-load-") as name:
        for master in bench.MASTERS:
            runs += bench.run_master(master, Path(name), rows_in, repeat)

    def find(master: str, source: str, kind: str) -> Any:
        return next(r for r in runs if (r.master, r.source, r.name) == (master, source, kind))

    rows = []
    for source in ("parquet", "generated"):
        load = find("local[2]", source, "bulk_load")
        floor = find("local[2]", source, "Spark floor: range sort into noop")
        rows.append(
            row(
                "bulk_load",
                f"bulk_load on local[2], {source} input, vs Spark's own range sort",
                "MB/s",
                load.mb_per_s,
                floor.mb_per_s,
                "Spark floor (sort into noop)",
                None,
                f"{load.seconds:.2f} s vs {floor.seconds:.2f} s; reported, no target",
            )
        )
    for source in ("parquet", "generated"):
        two, one = find("local[2]", source, "bulk_load"), find("local[1]", source, "bulk_load")
        rows.append(
            row(
                "bulk_load",
                f"bulk_load local[2] vs local[1], {source} input",
                "MB/s",
                two.mb_per_s,
                one.mb_per_s,
                "Spark local[1]",
                None,
                "reported, no target",
            )
        )
    report = bench.render(runs, command("bulk_load", options), rows_in)
    setup = (
        f"{rows_in:,} rows of {bench.ROW_BYTES} B ({rows_in * bench.ROW_BYTES / 1e6:.1f} MB of rows) "
        "generated by Spark, loaded into a fresh database on the local disk; MB/s = row MB / wall time of "
        f"the whole `bulk_load` call; best of {repeat}."
    )
    return Outcome(rows, setup, bench.render_table(runs), report)


def collect_sst_formats(options: Options) -> Outcome:
    from benchmarks import bench_sst_formats as bench

    entries, gets, rounds = (20_000, 2_000, 1) if options.quick else (200_000, 20_000, 3)
    results, final = bench.run(entries, gets, rounds, options.quick)

    def find(candidate: str, block: int) -> Any:
        return next(
            r
            for r in results
            if r.candidate.startswith(candidate)
            and r.block_size == block
            and r.compression == "lz4"
            and r.value_len == 100
        )

    ours, theirs = find("A", 16 * 1024), find("B", 64 * 1024)
    label = "Parquet row groups, 64 KiB lz4"
    rows = [
        row(
            "sst_formats",
            f"shipped format (Arrow IPC, 16 KiB lz4): {what}",
            unit,
            mine,
            other,
            label,
            None,
            "reported",
        )
        for what, unit, mine, other in (
            ("cold get", "µs", ours.cold_get_us, theirs.cold_get_us),
            ("warm get", "µs", ours.warm_get_us, theirs.warm_get_us),
            ("scan", "MB/s", ours.scan_mbs, theirs.scan_mbs),
            ("write", "MB/s", ours.write_mbs, theirs.write_mbs),
        )
    ]
    setup = bench.describe(entries, rounds) + " Summary rows: 100 B values."
    return Outcome(
        rows, setup, bench.render_tables(results, final), bench.render_report(results, final, entries, rounds)
    )


def collect_s3(options: Options) -> Outcome:
    from benchmarks import bench_s3 as bench

    return bench.collect(options)


def collect_s3_fleet(options: Options) -> Outcome:
    from benchmarks import bench_s3_fleet as bench

    return bench.collect(options)


def collect_s3_compaction(options: Options) -> Outcome:
    from benchmarks import bench_s3_compaction as bench

    return bench.collect(options)


def collect_spark_cluster(options: Options) -> Outcome:
    from benchmarks import bench_spark_cluster as bench

    return bench.collect(options)


def collect_spark_source(options: Options) -> Outcome:
    from benchmarks import bench_spark_source as bench

    return bench.collect(options)


def collect_writer_memory(options: Options) -> Outcome:
    from benchmarks import bench_writer_memory as bench

    return bench.collect(options)


def collect_orchestration(options: Options) -> Outcome:
    from benchmarks import bench_orchestration as bench

    return bench.collect(options)


def collect_maintenance_engines(options: Options) -> Outcome:
    from benchmarks import bench_maintenance_engines as bench

    return bench.collect(options)


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "manifest_requests",
        "Object-store requests per manifest operation",
        "bench_manifest_requests",
        False,
        collect_manifest_requests,
    ),
    Benchmark("manifest_codec", "Manifest codec", "bench_manifest_codec", False, collect_manifest_codec),
    Benchmark("engine", "Engine vs SlateDB's Python binding", "bench_engine", False, collect_engine),
    Benchmark("compaction", "Compaction", "bench_compaction", False, collect_compaction),
    Benchmark("gc", "Garbage collection: requests per run", "bench_gc", False, collect_gc),
    Benchmark("rescale", "Rescaling: split and merge", "bench_rescale", False, collect_rescale),
    Benchmark("bulk_load", "Bulk load (Spark)", "bench_bulk_load", True, collect_bulk_load),
    Benchmark("sst_formats", "SST format candidates", "bench_sst_formats", False, collect_sst_formats),
    Benchmark("s3", "Reopen on S3 with latency", "bench_s3", False, collect_s3),
    Benchmark("s3_fleet", "Fleet sensor ticks on S3 with latency", "bench_s3_fleet", False, collect_s3_fleet),
    Benchmark(
        "s3_compaction", "Compaction on S3 with latency", "bench_s3_compaction", False, collect_s3_compaction
    ),
    Benchmark(
        "writer_memory",
        "Writer memory against its options' budget",
        "bench_writer_memory",
        False,
        collect_writer_memory,
    ),
    Benchmark(
        "spark_cluster",
        "Spark: local[2] vs a two-worker standalone cluster",
        "bench_spark_cluster",
        True,
        collect_spark_cluster,
    ),
    Benchmark(
        "spark_source",
        "Spark data source vs read_db and bulk_load",
        "bench_spark_source",
        True,
        collect_spark_source,
    ),
    Benchmark(
        "orchestration",
        "maintenance_job: launch to success",
        "bench_orchestration",
        False,
        collect_orchestration,
    ),
    Benchmark(
        "maintenance_engines",
        "Maintenance: SlateDB databases vs ours",
        "bench_maintenance_engines",
        False,
        collect_maintenance_engines,
    ),
)


def by_name(names: Sequence[str]) -> list[Benchmark]:
    known = {b.name: b for b in BENCHMARKS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise KeyError(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [b for b in BENCHMARKS if b.name in names]
