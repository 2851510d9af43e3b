"""Encode and decode time of a large manifest (slate_ops.manifest.codec).

The manifest (benchmarks/manifest_fixtures.py) has 10,000 SSTs and 10,000 views of them: 2,000 in
L0 and 8,000 across 10 sorted runs, 20-byte keys, a few checkpoints and external databases.
Targets: decode < 50 ms (it is read on every open and every manifest poll), encode < 150 ms.
Both are judged on the best of the runs; the median shows how noisy the machine was.

Run: ``.venv/bin/python benchmarks/bench_manifest_codec.py [--runs N]``
Writes ``benchmarks/results/manifest_codec.md``.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from manifest_fixtures import build_large_manifest

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20, help="timed runs of each (default: %(default)s)")
    args = parser.parse_args(argv)

    manifest = build_large_manifest()
    data = encode_manifest(manifest)
    if decode_manifest(data, "bench") != manifest:
        print("error: the manifest does not round-trip", file=sys.stderr)
        return 2
    views = len(manifest.l0) + sum(len(r.views) for r in manifest.compacted)
    rows = [
        ("decode", time_ms(lambda: decode_manifest(data, "bench"), args.runs), DECODE_TARGET_MS),
        ("encode", time_ms(lambda: encode_manifest(manifest), args.runs), ENCODE_TARGET_MS),
    ]

    lines = [
        "# Manifest codec benchmark",
        "",
        f"Manifest: {len(manifest.ssts):,} SSTs, {views:,} views ({len(manifest.l0):,} in L0, "
        f"{len(manifest.compacted)} sorted runs), {len(manifest.checkpoints)} checkpoints, "
        f"{len(manifest.external_dbs)} external dbs; encoded size {len(data):,} bytes.",
        f"Python {platform.python_version()} on {platform.machine()}, {args.runs} runs each "
        "(`python benchmarks/bench_manifest_codec.py`).",
        "",
        "| operation | best (ms) | median (ms) | target (ms) | result |",
        "|---|---:|---:|---:|---|",
    ]
    passed = True
    for name, times, target in rows:
        best = min(times)
        ok = best < target
        passed &= ok
        lines.append(
            f"| {name} | {best:.1f} | {statistics.median(times):.1f} | < {target:.0f} | "
            f"{'pass' if ok else 'FAIL'} |"
        )
    report = "\n".join(lines) + "\n"
    print(report, end="")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(report)
    print(f"\nwrote {RESULTS}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
