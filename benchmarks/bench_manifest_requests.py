"""Object-store requests per manifest operation (docs/benchmarks.md).

Targets (issue 2): an update with no conflict costs at most 2 requests (the create and the boundary
check); a fresh read of the latest manifest costs 1 request when the cache is current. The other
rows' bounds are the counts measured when they were added (a regression check, not a target).

Run: ``python -m benchmarks.bench_manifest_requests``
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.reporting import argument_parser, markdown_table, output, publish
from slate_ops import admin
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import CountingStore, LocalStore, MemoryStore, ObjectStore

RESULTS = Path(__file__).parent / "results" / "manifest_requests.md"
ISSUE_TARGETS = ("update, no conflict (cache current)", "read latest, cache current")  # issue 2


def measure(store: CountingStore, action: Callable[[], object]) -> dict[str, int]:
    store.reset()
    action()
    return {kind: n for kind, n in store.counts.items() if n}


def run(inner: ObjectStore) -> list[tuple[str, dict[str, int], int]]:
    store = CountingStore(inner)
    admin.create_db("db", store)
    writer = ManifestStore(store, "db")
    writer.read_latest()
    rows = [
        ("update, no conflict (cache current)", measure(store, lambda: writer.update(lambda v: v.value)), 2),
        ("read latest, cache current", measure(store, writer.read_latest), 1),
        ("read latest, cold (new process)", measure(store, ManifestStore(store, "db").read_latest), 2),
    ]
    other = ManifestStore(store, "db")
    other.read_latest()
    writer.update(lambda v: v.value)  # other's cache is now one version behind
    rows.append(("update, one conflict", measure(store, lambda: other.update(lambda v: v.value)), 5))
    # 5 since the checkpoint also covers WAL-only writes: one LIST of wal/ before the commit (3a67768).
    rows.append(
        ("admin create_checkpoint (cold)", measure(store, lambda: admin.create_checkpoint("db", store)), 5)
    )
    return [(name, counts, target) for name, counts, target in rows]


def run_all_stores() -> list[tuple[str, str, dict[str, int], int]]:
    """``(store, operation, requests by kind, target)`` for every operation on each store."""
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, inner in (("memory", MemoryStore()), ("local", LocalStore(tmp))):
            for name, counts, target in run(inner):
                results.append((label, name, counts, target))
    return results


def render(results: list[tuple[str, str, dict[str, int], int]]) -> str:
    rows = [
        [
            label,
            name,
            sum(counts.values()),
            ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
            f"<= {target}",
        ]
        for label, name, counts, target in results
    ]
    return markdown_table(["store", "operation", "requests", "by kind", "target"], rows, "llrlr")


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, RESULTS)
    args = parser.parse_args(argv)
    results = run_all_stores()
    publish(render(results), output(args))
    return 0 if all(sum(counts.values()) <= target for _, _, counts, target in results) else 1


if __name__ == "__main__":
    sys.exit(main())
