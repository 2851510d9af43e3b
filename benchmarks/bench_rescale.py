"""Split and merge cost: wall time and object-store requests at two database sizes (docs/benchmarks.md).

Run: ``python -m benchmarks.bench_rescale [--sizes-mb 10,1024] [--repeat 21] [--store-url U]``.

Target (issue 6): the largest size within 1.5x of the smallest, in time and in requests — split and
merge are metadata-only, so their cost follows the manifest, not the data.

Method
------
* Each database is written straight to the store, not through ``Db.put``: one sorted run of
  ``--sst-mb`` (64 MiB) SSTs holding 7/8 of the bytes, plus ``L0_SSTS`` (4) L0 SSTs of 1/32 each that
  overwrite random keys. Rows: 16-byte keys (8 uniform random bytes, sorted, then 8 random bytes) and
  1 KiB random values (incompressible, so stored bytes ~ logical bytes); SSTs from ``encode_sst``
  under ``<db>/compacted/``, then manifest 1 lists them; ``os.sync()`` before timing. Sizes are
  stored SST bytes in binary units (1 GB = 2**30 bytes).
  Every size has the same LSM shape (1 sorted run, 4 L0 SSTs); the run's SST count grows with size.
* Split keys: ``slate_ops.admin.suggest_split_keys`` (block-index weighted; evenly spaced 8-byte
  prefixes if it gives fewer keys), computed outside the timed split (its cost is reported apart).
* One repetition per size: ``rescale.split`` into ``--shards`` (4) new paths, then ``rescale.merge`` of
  those shards into one new path, each through a request-recording wrapper of ``CountingStore`` and
  timed with ``perf_counter``. Afterwards (untimed) the shards' final checkpoints are deleted from
  the source, so every repetition splits the same source state. Both sizes run in every repetition,
  in alternating order, so load from other processes hits both; one untimed warm-up repetition
  comes first. Medians are reported; LIST counts one request per call (S3 pages every 1,000 keys).
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from ulid import ULID

from benchmarks.reporting import argument_parser, command_line, markdown_table, output, publish
from slate_ops import admin
from slate_ops.admin import rescale
from slate_ops.admin.split_keys import suggest_split_keys
from slate_ops.layout import sst_key
from slate_ops.manifest.codec import encode_manifest
from slate_ops.manifest.model import CompactedSst, Manifest, SortedRun, SstView
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import CountingStore, LocalStore, ObjectStore, open_store
from slate_ops.objstore.base import GetResult, ObjectMeta, PutMode, PutResult
from slate_ops.objstore.wrappers import OPS
from slate_ops.sst import KIND_VALUE, SCHEMA, encode_sst

RESULTS = Path(__file__).parent / "results" / "rescale_report.json"  # rescale.json: the suite's rows
MiB = 1024 * 1024
KEY_BYTES = 16
VALUE_BYTES = 1024
ROW_BYTES = KEY_BYTES + VALUE_BYTES + 17  # + offsets, seq and kind stored per row
L0_SSTS = 4
L0_SHARE = 1 / 8  # of the stored bytes, spread over the L0 SSTs
SORTED_RUN_ID = 0
TARGET_RATIO = 1.5
DEFAULT_SIZES_MB = (10.0, 1024.0)
DEFAULT_SST_MB = 64.0
_OVERWRITE = PutMode.overwrite()

# --- request recording ------------------------------------------------------------------------------


class RecordingStore(CountingStore):
    """:class:`CountingStore` that also records ``(op, key)`` and bytes put, to see which namespace
    (``manifest/``, ``compacted/`` ...) each request touched."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.calls: list[tuple[str, str]] = []
        self.bytes_put = 0

    def reset(self) -> None:
        super().reset()
        self.calls = []
        self.bytes_put = 0

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        self.calls.append(("get", key))
        return super().get(key, byte_range)

    def head(self, key: str) -> ObjectMeta:
        self.calls.append(("head", key))
        return super().head(key)

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        self.calls.append(("put", key))
        self.bytes_put += len(data)
        return super().put(key, data, mode, put_id)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        self.calls.append(("list", prefix))
        return super().list(prefix, start_after)

    def delete(self, key: str) -> None:
        self.calls.append(("delete", key))
        super().delete(key)


def namespace(key: str) -> str:
    """The database namespace of a key or list prefix: ``manifest``, ``compacted``, ``wal``, ``gc`` ..."""
    for name in ("manifest", "compacted", "wal", "gc", "compactions", "checkpoints"):
        if f"/{name}/" in key or key.endswith(f"/{name}"):
            return name
    return "other"


@dataclass(frozen=True)
class Sample:
    """One timed call: seconds, requests per op, per namespace and bytes put."""

    seconds: float
    cpu_seconds: float  # this process's CPU time (threads included): the Python work, without I/O waits
    requests: dict[str, int]
    by_namespace: dict[str, int]
    bytes_put: int
    sst_requests: int  # requests under <db>/compacted/ (SST objects)
    sst_puts: int


def measure(store: RecordingStore, action: Callable[[], object]) -> tuple[Sample, object]:
    store.reset()
    started, cpu_started = time.perf_counter(), time.process_time()
    result = action()
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    requests = {op: store.counts[op] for op in OPS}
    requests["total"] = sum(requests.values())
    by_namespace: dict[str, int] = {}
    for _, key in store.calls:
        by_namespace[namespace(key)] = by_namespace.get(namespace(key), 0) + 1
    sst_calls = [(op, key) for op, key in store.calls if namespace(key) == "compacted"]
    sst_puts = sum(1 for op, _ in sst_calls if op == "put")
    sample = Sample(
        seconds,
        cpu_seconds,
        requests,
        dict(sorted(by_namespace.items())),
        store.bytes_put,
        len(sst_calls),
        sst_puts,
    )
    return sample, result


# --- databases --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Database:
    """A generated source database and its shape."""

    label: str
    path: str
    target_bytes: int
    stored_bytes: int
    rows: int
    l0_ssts: int
    run_ssts: int
    manifest_bytes: int
    build_seconds: float

    @property
    def ssts(self) -> int:
        return self.l0_ssts + self.run_ssts


def label_of(size_mb: float) -> str:
    return f"{size_mb / 1024:g} GB" if size_mb >= 1024 else f"{size_mb:g} MB"


def _binary(data: bytes, rows: int, width: int) -> pa.Array:
    """``rows`` values of ``width`` bytes cut from ``data``, as a ``binary`` array."""
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), rows, [None, pa.py_buffer(data)])
    return fixed.cast(pa.binary())


def _sst(
    store: ObjectStore, path: str, keys: pa.Array, first_seq: int, rng: np.random.Generator
) -> CompactedSst:
    rows = len(keys)
    table = pa.Table.from_arrays(
        [
            keys,
            pa.array(np.arange(first_seq, first_seq + rows, dtype=np.uint64)),
            pa.array(np.full(rows, KIND_VALUE, dtype=np.uint8)),
            _binary(rng.bytes(rows * VALUE_BYTES), rows, VALUE_BYTES),
        ],
        schema=SCHEMA,
    )
    data, info = encode_sst(table)
    sst_id = ULID()
    store.put(sst_key(path, sst_id), data)
    return CompactedSst(sst_id, info)


def build_database(
    store: ObjectStore, path: str, size_mb: float, sst_mb: float = DEFAULT_SST_MB, seed: int = 11
) -> Database:
    """Write one sorted run of ``sst_mb`` SSTs and ``L0_SSTS`` L0 SSTs, ~``size_mb`` MiB stored."""
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    total_rows = max(L0_SSTS * 8, int(size_mb * MiB / ROW_BYTES))
    l0_rows = max(1, int(total_rows * L0_SHARE / L0_SSTS))
    run_rows = total_rows - L0_SSTS * l0_rows
    prefixes = np.unique(rng.integers(0, 2**64, size=run_rows, dtype=np.uint64))
    rows = len(prefixes)
    matrix = np.empty((rows, KEY_BYTES), dtype=np.uint8)
    matrix[:, :8] = prefixes.astype(">u8").view(np.uint8).reshape(rows, 8)
    matrix[:, 8:] = rng.integers(0, 256, size=(rows, 8), dtype=np.uint8)
    keys = _binary(matrix.tobytes(), rows, KEY_BYTES)

    count = max(1, round(rows * ROW_BYTES / (sst_mb * MiB)))  # SSTs of the run, ~sst_mb each
    bounds = [rows * i // count for i in range(count + 1)]
    run = [
        _sst(store, path, keys.slice(start, end - start), 1 + start, rng)
        for start, end in itertools.pairwise(bounds)
    ]
    seq = rows
    l0: list[CompactedSst] = []
    for _ in range(L0_SSTS):  # oldest first; each overwrites random keys of the run with newer seqs
        chosen = np.sort(rng.choice(rows, size=min(l0_rows, rows), replace=False))
        l0.append(_sst(store, path, keys.take(pa.array(chosen)), seq + 1, rng))
        seq += len(chosen)
    l0.reverse()  # the manifest lists L0 newest first
    manifest = Manifest(
        initialized=True,
        ssts=(*l0, *run),
        l0=tuple(SstView(ULID(), s.id) for s in l0),
        compacted=(SortedRun(SORTED_RUN_ID, tuple(SstView(ULID(), s.id) for s in run)),),
        last_l0_seq=seq,
    )
    ManifestStore(store, path).create_initial(manifest)
    return Database(
        label=label_of(size_mb),
        path=path,
        target_bytes=int(size_mb * MiB),
        stored_bytes=sum(s.info.size_bytes for s in manifest.ssts),
        rows=seq,
        l0_ssts=len(l0),
        run_ssts=len(run),
        manifest_bytes=len(encode_manifest(manifest)),
        build_seconds=time.perf_counter() - started,
    )


def even_split_keys(shards: int) -> list[bytes]:
    """``shards - 1`` evenly spaced 8-byte keys (the key prefixes are uniform over 8 bytes)."""
    return [(i * 2**64 // shards).to_bytes(8, "big") for i in range(1, shards)]


def split_keys(store: RecordingStore, db: Database, shards: int) -> tuple[list[bytes], str, Sample | None]:
    """The split keys, how they were chosen, and the measured cost of suggesting them."""
    sample, keys = measure(store, lambda: suggest_split_keys(db.path, store, shards))
    assert isinstance(keys, list)
    if len(keys) == shards - 1:
        return keys, "slate_ops.admin.suggest_split_keys", sample
    return even_split_keys(shards), "evenly spaced 8-byte prefixes (suggest_split_keys gave fewer)", sample


# --- repetitions ------------------------------------------------------------------------------------


def one_repetition(
    store: RecordingStore, db: Database, keys: Sequence[bytes], tag: str, shards: int
) -> tuple[Sample, Sample, list[int], list[str]]:
    """Split ``db`` into fresh shard paths and merge them into a fresh path; returns the samples, the
    shards' SST counts and the new databases (merged first: see :func:`remove_targets`)."""
    base = f"{db.path.rsplit('/', 1)[0]}/{tag}"
    targets = [f"{base}/shard{i}" for i in range(shards)]
    split, split_report = measure(store, lambda: rescale.split(db.path, store, keys, targets))
    merge, _ = measure(store, lambda: rescale.merge(targets, store, f"{base}/merged"))
    assert isinstance(split_report, rescale.RescaleReport)
    return split, merge, [d.ssts for d in split_report.databases], [f"{base}/merged", *targets]


def remove_targets(store: RecordingStore, db: Database, created: Sequence[str]) -> None:
    """Hard-destroy a repetition's databases (merged first: it holds final checkpoints on the shards),
    which releases their final checkpoints on the source, so every repetition starts from the same
    source manifest (the API refuses to delete a final checkpoint by hand)."""
    for path in created:
        admin.destroy(path, store.inner, soft=False, dry_run=False)
    left = ManifestStore(store.inner, db.path).read_latest_required().value.checkpoints
    assert not left, f"removing {list(created)} left checkpoints {[c.id for c in left]} on {db.path}"


def summarize(samples: list[Sample], shard_ssts: list[int] | None = None) -> dict[str, Any]:
    """Medians over repetitions (request counts should not vary; ``counts_identical`` says)."""
    first = samples[0]
    summary: dict[str, Any] = {
        "seconds_median": statistics.median(s.seconds for s in samples),
        "seconds_min": min(s.seconds for s in samples),
        "seconds_all": [round(s.seconds, 6) for s in samples],
        "cpu_seconds_median": statistics.median(s.cpu_seconds for s in samples),
        "requests": {op: int(statistics.median(s.requests[op] for s in samples)) for op in first.requests},
        "requests_by_namespace": first.by_namespace,
        "counts_identical": all(s.requests == first.requests for s in samples),
        "bytes_put": first.bytes_put,
        "sst_object_requests": max(s.sst_requests for s in samples),
        "sst_object_puts": max(s.sst_puts for s in samples),
    }
    if shard_ssts is not None:
        summary["ssts_per_new_database"] = shard_ssts
    return summary


def run(
    store: ObjectStore,
    sizes_mb: Sequence[float] = DEFAULT_SIZES_MB,
    *,
    sst_mb: float = DEFAULT_SST_MB,
    repeat: int = 21,
    warmup: int = 1,
    shards: int = 4,
    prefix: str | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Build one database per size in ``store``, measure split and merge; the report as a dict."""
    prefix = prefix or f"bench-rescale-{uuid.uuid4().hex[:8]}"
    recording = RecordingStore(store)
    databases: list[Database] = []
    for i, size in enumerate(sizes_mb):
        db = build_database(store, f"{prefix}/size{i}/source", size, sst_mb)
        progress(
            f"built {db.label}: {db.stored_bytes / MiB:.1f} MiB, {db.ssts} SSTs in {db.build_seconds:.1f} s"
        )
        databases.append(db)
    os.sync()  # write the build's dirty pages back now, not during the timed (fsyncing) puts
    chosen = [split_keys(recording, db, shards) for db in databases]
    splits: dict[str, list[Sample]] = {db.label: [] for db in databases}
    merges: dict[str, list[Sample]] = {db.label: [] for db in databases}
    shard_ssts: dict[str, list[int]] = {}
    for rep in range(warmup + repeat):
        pairs = list(zip(databases, chosen, strict=True))
        for db, (keys, _, _) in pairs if rep % 2 == 0 else reversed(pairs):  # alternate the order
            tag = f"warmup{rep}" if rep < warmup else f"rep{rep - warmup}"
            split, merge, ssts, created = one_repetition(recording, db, keys, tag, shards)
            if rep < warmup + repeat - 1:  # the last repetition's databases are kept to be read
                remove_targets(recording, db, created)
            if rep >= warmup:
                splits[db.label].append(split)
                merges[db.label].append(merge)
                shard_ssts[db.label] = ssts
            progress(
                f"{db.label} {tag}: split {split.seconds * 1e3:.1f} ms, merge {merge.seconds * 1e3:.1f} ms"
            )

    small, large = databases[0].label, databases[-1].label
    operations: dict[str, Any] = {}
    for name, samples in (("split", splits), ("merge", merges)):
        per_size = {
            label: summarize(s, shard_ssts[label] if name == "split" else None)
            for label, s in samples.items()
        }
        time_ratio = per_size[large]["seconds_median"] / per_size[small]["seconds_median"]
        request_ratio = per_size[large]["requests"]["total"] / per_size[small]["requests"]["total"]
        cpu_ratio = per_size[large]["cpu_seconds_median"] / max(per_size[small]["cpu_seconds_median"], 1e-9)
        operations[name] = {
            "by_size": per_size,
            "ratio_time": round(time_ratio, 3),
            "ratio_requests": round(request_ratio, 3),
            "ratio_cpu": round(cpu_ratio, 3),  # informational: not part of the target
            "met": time_ratio <= TARGET_RATIO and request_ratio <= TARGET_RATIO,
        }
    suggestions = {
        db.label: None if sample is None else {"seconds": sample.seconds, "requests": sample.requests}
        for db, (_, _, sample) in zip(databases, chosen, strict=True)
    }
    return {
        "benchmark": "benchmarks/bench_rescale.py",
        "target": f"largest / smallest <= {TARGET_RATIO} in median time and in total requests",
        "store": store.url if not isinstance(store, LocalStore) else "local directory (LocalStore)",
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "shards": shards,
        "repetitions": repeat,
        "warmup_repetitions": warmup,
        "split_keys_from": chosen[0][1],
        "databases": [
            {
                "label": db.label,
                "target_bytes": db.target_bytes,
                "stored_bytes": db.stored_bytes,
                "rows": db.rows,
                "ssts": db.ssts,
                "l0_ssts": db.l0_ssts,
                "sorted_runs": 1,
                "sorted_run_ssts": db.run_ssts,
                "manifest_bytes": db.manifest_bytes,
                "build_seconds": round(db.build_seconds, 2),
            }
            for db in databases
        ],
        "operations": operations,
        "suggest_split_keys": suggestions,
        "met": all(op["met"] for op in operations.values()),
    }


def table(report: dict[str, Any]) -> str:
    """The Markdown table of docs/benchmarks.md: one row per (operation, size), then the ratio."""
    kinds = (*OPS, "total")
    header = ["operation", "database", "SSTs", "median ms", "CPU ms", *(k.upper() for k in kinds), "target"]
    rows: list[list[object]] = []
    ssts = {d["label"]: d["ssts"] for d in report["databases"]}
    for name, op in report["operations"].items():
        labels = list(op["by_size"])
        for label, s in op["by_size"].items():
            ms, cpu_ms = s["seconds_median"] * 1e3, s["cpu_seconds_median"] * 1e3
            cells = [name, label, ssts[label], f"{ms:.1f}", f"{cpu_ms:.1f}"]
            rows.append([*cells, *(s["requests"][k] for k in kinds), ""])
        ratio = f"{labels[-1]} / {labels[0]}"
        met = f"<= {TARGET_RATIO}x: {'met' if op['met'] else 'NOT met'}"
        times, requests = f"**{op['ratio_time']:.2f}x**", f"**{op['ratio_requests']:.2f}x**"
        cpu = f"{op['ratio_cpu']:.2f}x"
        rows.append([name, ratio, "", times, cpu, *[""] * len(OPS), requests, met])
    return markdown_table(header, rows, "llrrr" + "r" * len(kinds) + "l")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argument_parser(__doc__, RESULTS)
    parser.add_argument("--sizes-mb", default=",".join(f"{s:g}" for s in DEFAULT_SIZES_MB))
    parser.add_argument("--sst-mb", type=float, default=DEFAULT_SST_MB, help="sorted-run SST size (MiB)")
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--store-url", help="default: a local directory store in a temp dir")
    args = parser.parse_args(argv)
    sizes = sorted(float(s) for s in args.sizes_mb.split(","))

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    tmp = None if args.store_url else tempfile.mkdtemp(prefix="bench-rescale-")
    store = open_store(args.store_url) if args.store_url else LocalStore(tmp or "")
    prefix = f"bench-rescale-{uuid.uuid4().hex[:8]}"
    try:
        report = run(
            store,
            sizes,
            sst_mb=args.sst_mb,
            repeat=args.repeat,
            warmup=args.warmup,
            shards=args.shards,
            prefix=prefix,
            progress=progress,
        )
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            for meta in list(store.list(prefix + "/")):
                store.delete(meta.key)
    report["command"] = command_line("benchmarks.bench_rescale", argv)
    publish(table(report), output(args), json.dumps(report, indent=2) + "\n")
    return 0 if report["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
