"""Encode and decode time of a large manifest (slate_ops.manifest.codec).

The manifest (benchmarks/manifest_fixtures.py) has 10,000 SSTs and 10,000 views of them: 2,000 in
L0 and 8,000 across 10 sorted runs, 20-byte keys, a few checkpoints and external databases.
Targets: decode < 50 ms (it is read on every open and every manifest poll), encode < 150 ms.
Both are judged on the best of the runs; the median shows how noisy the machine was.

Run: ``python -m benchmarks.bench_manifest_codec [--runs N]``
Writes ``benchmarks/results/manifest_codec.md``.
"""

from __future__ import annotations

import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.manifest_fixtures import build_large_manifest
from benchmarks.reporting import argument_parser, command_line, markdown_table, output, publish
from slate_ops.manifest.codec import decode_manifest, encode_manifest

RESULTS = Path(__file__).parent / "results" / "manifest_codec.md"
DECODE_TARGET_MS = 50.0
ENCODE_TARGET_MS = 150.0


def time_ms(action: Callable[[], object], runs: int) -> list[float]:
    """Wall time of each of ``runs`` calls, in ms (the result is released outside the timing)."""
    action()  # warm-up: imports, first-call caches
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = action()
        times.append((time.perf_counter() - start) * 1000)
        del result
    return times


@dataclass(frozen=True)
class CodecResult:
    """Timings of the benchmark's manifest: ``(operation, times in ms, target ms)`` rows."""

    ssts: int
    views: int
    l0: int
    sorted_runs: int
    checkpoints: int
    external_dbs: int
    encoded_bytes: int
    runs: int
    rows: list[tuple[str, list[float], float]]


def run(runs: int) -> CodecResult:
    """Build the 10,000-SST manifest, check it round-trips, time ``runs`` decodes and encodes."""
    manifest = build_large_manifest()
    data = encode_manifest(manifest)
    if decode_manifest(data, "bench") != manifest:
        raise AssertionError("the manifest does not round-trip")
    views = len(manifest.l0) + sum(len(r.views) for r in manifest.compacted)
    rows = [
        ("decode", time_ms(lambda: decode_manifest(data, "bench"), runs), DECODE_TARGET_MS),
        ("encode", time_ms(lambda: encode_manifest(manifest), runs), ENCODE_TARGET_MS),
    ]
    return CodecResult(
        len(manifest.ssts), views, len(manifest.l0), len(manifest.compacted), len(manifest.checkpoints),
        len(manifest.external_dbs), len(data), runs, rows,
    )  # fmt: skip


def render_table(result: CodecResult) -> str:
    rows = [
        [
            name,
            f"{min(times):.1f}",
            f"{statistics.median(times):.1f}",
            f"< {target:.0f}",
            "pass" if min(times) < target else "FAIL",
        ]
        for name, times, target in result.rows
    ]
    header = ["operation", "best (ms)", "median (ms)", "target (ms)", "result"]
    return markdown_table(header, rows, "lrrrl")


def describe(result: CodecResult) -> str:
    return (
        f"Manifest: {result.ssts:,} SSTs, {result.views:,} views ({result.l0:,} in L0, "
        f"{result.sorted_runs} sorted runs), {result.checkpoints} checkpoints, "
        f"{result.external_dbs} external dbs; encoded size {result.encoded_bytes:,} bytes."
    )


def render_report(result: CodecResult, command: str) -> str:
    return "\n".join(
        [
            "# Manifest codec benchmark",
            "",
            describe(result),
            f"Python {platform.python_version()} on {platform.machine()}, {result.runs} runs each "
            f"(`{command}`).",
            "",
            render_table(result),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, RESULTS)
    parser.add_argument("--runs", type=int, default=20, help="timed runs of each (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        result = run(args.runs)
    except AssertionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    publish(render_report(result, command_line("benchmarks.bench_manifest_codec", argv)), output(args))
    return 0 if all(min(times) < target for _, times, target in result.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
