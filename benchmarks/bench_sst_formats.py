"""SST format candidates, measured on the same data: Arrow IPC blocks in our container (A) vs Parquet (B).

A is ``slate_ops.sst`` itself with different ``SstOptions``. B is a prototype here: one Parquet file,
one row group per block, row-group statistics as the index, the same bloom filter in the file's
key-value metadata, the same decoded-block form and LRU cache, read through ranged GETs. Only the
container and block codec differ, so the comparison isolates them.

Data: ``--entries`` rows (default 200,000), random 16-20 byte keys, one version each, values of
100 and 400 bytes that compress about 2:1 (like db_bench: a random half, then repeated).
Per configuration: encode speed (logical bytes = keys + values + 9 B per row), file size, open
(footer + index + bloom from a LocalStore file), point gets of existing keys with a warm cache and
with no cache (every get fetches and decodes its block), and full scans as Python entries and as
Arrow batches. Latencies are the best of several rounds (the box is shared and noisy).

Run: ``python -m benchmarks.bench_sst_formats [--entries N] [--quick]``
Writes ``benchmarks/results/sst_formats.md``.
"""

from __future__ import annotations

import io
import platform
import random
import sys
import tempfile
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.reporting import argument_parser, markdown_table, output, publish
from slate_ops.objstore import LocalStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.sst import SCHEMA, BlockCache, BloomFilter, SstOptions, SstReader, encode_sst
from slate_ops.sst.block import Block, block_from_batch

RESULTS = Path(__file__).parent / "results" / "sst_formats.md"
# The SlateDB Python binding on this machine kind (measured outside this repository, not re-run here).
SLATEDB_GETS_PER_S = 23_000
Entry = tuple[bytes, int, int, bytes]


# --- data -------------------------------------------------------------------------------------


def make_table(n: int, value_len: int, seed: int = 7) -> pa.Table:
    """``n`` rows sorted by key: unique random 16-20 byte keys, seq 1..n shuffled, 2:1 compressible values."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(16, 21, size=n)
    raw = rng.integers(0, 256, size=int(lengths.sum()), dtype=np.uint8).tobytes()
    ends = np.cumsum(lengths)
    keys = sorted({raw[e - ln : e] for e, ln in zip(ends.tolist(), lengths.tolist(), strict=True)})
    n = len(keys)
    half = value_len // 2
    noise = rng.integers(0, 256, size=n * half, dtype=np.uint8).tobytes()
    values = [(noise[i * half : (i + 1) * half] * 2 + b"x")[:value_len] for i in range(n)]
    seqs = rng.permutation(n) + 1
    return pa.table(
        [
            pa.array(keys, pa.binary()),
            pa.array(seqs, pa.uint64()),
            pa.array(np.zeros(n, dtype=np.uint8)),
            pa.array(values, pa.binary()),
        ],
        schema=SCHEMA,
    )


def logical_bytes(table: pa.Table) -> int:
    lengths = pc.add(pc.binary_length(table["key"]), pc.binary_length(table["value"]))
    return int(pc.sum(lengths).as_py()) + 9 * int(table.num_rows)


# --- candidate B: Parquet row groups ----------------------------------------------------------


def encode_parquet(table: pa.Table, block_size: int, compression: str) -> bytes:
    """One row group per ``block_size`` bytes of rows; our bloom filter in the key-value metadata."""
    keys = table["key"].combine_chunks()
    values = table["value"].combine_chunks()
    sizes = pc.binary_length(keys).to_numpy().astype(np.int64) + pc.binary_length(values).to_numpy() + 17
    bucket = (np.cumsum(sizes) - sizes) // block_size
    starts = np.concatenate([[0], np.flatnonzero(np.diff(bucket)) + 1]).tolist()
    bloom = BloomFilter.build(keys.to_pylist(), 10)
    schema = SCHEMA.with_metadata({b"slate.bloom": bloom.encode()})
    sink = io.BytesIO()
    with pq.ParquetWriter(
        sink, schema, compression=compression, use_dictionary=False, write_statistics=["key"]
    ) as writer:
        for start, end in zip(starts, [*starts[1:], table.num_rows], strict=True):
            writer.write_table(table.slice(start, end - start), row_group_size=end - start)
    return sink.getvalue()


class _RangedFile(io.RawIOBase):
    """A read-only file over an object: ranged GETs, with the already-fetched tail served locally."""

    def __init__(self, store: ObjectStore, key: str, size: int, tail: bytes) -> None:
        self._store, self._key, self._size, self._tail = store, key, size, tail
        self._tail_start = size - len(tail)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else self._pos + offset if whence == 1 else self._size + offset
        return self._pos

    def read(self, n: int | None = -1) -> bytes:
        end = self._size if n is None or n < 0 else min(self._size, self._pos + n)
        start = self._pos
        if start >= self._tail_start:
            data = self._tail[start - self._tail_start : end - self._tail_start]
        else:
            data = self._store.get(self._key, (start, end)).data
        self._pos = end
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class ParquetSst:
    """Candidate B's reader: the same get/scan contract as SstReader for the measured paths."""

    def __init__(self, store: ObjectStore, key: str, size: int, cache: BlockCache | None) -> None:
        tail_len = min(size, max(64 * 1024, size // 32))
        tail = store.get(key, (size - tail_len, size)).data
        self._file = pq.ParquetFile(_RangedFile(store, key, size, tail), pre_buffer=True)
        meta = self._file.metadata
        self._first_keys: list[bytes] = []
        self._last_keys: list[bytes] = []
        for i in range(meta.num_row_groups):
            stats = meta.row_group(i).column(0).statistics
            self._first_keys.append(stats.min)
            self._last_keys.append(stats.max)
        self._bloom = BloomFilter.decode(self._file.schema_arrow.metadata[b"slate.bloom"])
        self._cache = cache
        self._id = key
        self._store, self._key, self._size = store, key, size

    def _block(self, i: int) -> Block:
        if self._cache is not None:
            block = self._cache.get((self._id, i))
            if block is not None:
                return block
        table = self._file.read_row_group(i)
        block = block_from_batch(table.combine_chunks().to_batches()[0], table.nbytes)
        if self._cache is not None:
            self._cache.put((self._id, i), block)
        return block

    def get(self, key: bytes) -> Entry | None:
        i = bisect_right(self._first_keys, key) - 1
        if i < 0 or key > self._last_keys[i] or not self._bloom.may_contain(key):
            return None
        block = self._block(i)
        keys = block.keys
        pos = bisect_right(keys, key) - 1
        if pos < 0 or keys[pos] != key:
            return None
        while pos > 0 and keys[pos - 1] == key:  # newest version first
            pos -= 1
        return (key, block.seqs[pos], block.kinds[pos], block.values[pos])

    def scan(self) -> Iterator[Entry]:
        for i in range(len(self._first_keys)):
            block = self._block(i)
            yield from zip(block.keys, block.seqs, block.kinds, block.values, strict=True)

    def read_table(self) -> pa.Table:
        data = self._store.get(self._key, (0, self._size)).data
        return pq.read_table(pa.BufferReader(data))


# --- measuring --------------------------------------------------------------------------------


def best_time(action: Callable[[], object], rounds: int) -> float:
    """Best wall time of ``rounds`` calls, in seconds."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def per_get_us(get: Callable[[bytes], object], keys: Sequence[bytes], rounds: int) -> float:
    def run() -> None:
        for key in keys:
            if get(key) is None:
                raise AssertionError("a key that was written is missing")

    return best_time(run, rounds) / len(keys) * 1e6


def drain(it: Iterator[Entry]) -> int:
    count = 0
    for _ in it:
        count += 1
    return count


@dataclass
class Row:
    candidate: str
    value_len: int
    block_size: int
    compression: str
    file_mb: float
    ratio: float
    write_mbs: float
    open_ms: float
    warm_get_us: float
    cold_get_us: float
    scan_mbs: float
    batches_mbs: float


def measure(
    candidate: str,
    table: pa.Table,
    block_size: int,
    compression: str | None,
    store: LocalStore,
    probe_keys: list[bytes],
    rounds: int,
) -> Row:
    logical = logical_bytes(table)
    name = f"{candidate}-{table.num_rows}-{block_size}-{compression}.sst"
    warm_keys = probe_keys
    cold_keys = probe_keys[: max(1, len(probe_keys) // 10)]
    if candidate == "A: Arrow IPC blocks":
        options = SstOptions(block_size=block_size, compression=compression)
        write = best_time(lambda: encode_sst(table, options), rounds)
        data, _ = encode_sst(table, options)
        store.put(name, data)
        open_s = best_time(lambda: SstReader.open(store, name, size=len(data)), rounds)
        cache = BlockCache(1 << 30)
        reader = SstReader.open(store, name, size=len(data), cache=cache)
        drain(reader.scan())  # warm the cache
        warm = per_get_us(reader.get, warm_keys, rounds)
        cold_reader = SstReader.open(store, name, size=len(data))
        cold = per_get_us(cold_reader.get, cold_keys, rounds)
        scan = best_time(lambda: drain(cold_reader.scan()), rounds)
        batches = best_time(cold_reader.read_table, rounds)
    else:
        assert compression is not None
        write = best_time(lambda: encode_parquet(table, block_size, compression), rounds)
        data = encode_parquet(table, block_size, compression)
        store.put(name, data)
        open_s = best_time(lambda: ParquetSst(store, name, len(data), None), rounds)
        pcache = BlockCache(1 << 30)
        preader = ParquetSst(store, name, len(data), pcache)
        drain(preader.scan())
        warm = per_get_us(preader.get, warm_keys, rounds)
        cold_preader = ParquetSst(store, name, len(data), None)
        cold = per_get_us(cold_preader.get, cold_keys, rounds)
        scan = best_time(lambda: drain(cold_preader.scan()), rounds)
        batches = best_time(cold_preader.read_table, rounds)
    store.delete(name)
    mb = 1024 * 1024
    return Row(
        candidate,
        table.column("value")[0].as_py().__len__(),
        block_size,
        str(compression).lower(),
        len(data) / mb,
        len(data) / logical,
        logical / mb / write,
        open_s * 1e3,
        warm,
        cold,
        logical / mb / scan,
        logical / mb / batches,
    )


def final_reader_timings(
    table: pa.Table, store: LocalStore, probe_keys: list[bytes], rounds: int
) -> list[str]:
    """Per-operation costs of the shipped reader with default options: a row of its table."""
    data, _ = encode_sst(table)
    store.put("final.sst", data)
    cache = BlockCache(1 << 30)
    reader = SstReader.open(store, "final.sst", size=len(data), cache=cache)
    drain(reader.scan())
    logical = logical_bytes(table)
    mb = 1024 * 1024
    rng = random.Random(3)
    absent = [bytes(rng.getrandbits(8) for _ in range(18)) for _ in range(len(probe_keys))]
    warm = per_get_us(reader.get, probe_keys, rounds)
    absent_us = best_time(lambda: [reader.get(k) for k in absent], rounds) / len(absent) * 1e6
    snap_us = best_time(lambda: [reader.get(k, 1 << 40) for k in probe_keys], rounds) / len(probe_keys) * 1e6
    cold_reader = SstReader.open(store, "final.sst", size=len(data))
    cold_keys = probe_keys[: len(probe_keys) // 10]
    cold = per_get_us(cold_reader.get, cold_keys, rounds)
    small = BlockCache(4 * 1024 * 1024)  # a cache far smaller than the file: mostly misses
    small_reader = SstReader.open(store, "final.sst", size=len(data), cache=small)
    mixed = per_get_us(small_reader.get, cold_keys, rounds)
    open_ms = best_time(lambda: SstReader.open(store, "final.sst", size=len(data)), rounds) * 1e3
    scan_cold = best_time(lambda: drain(cold_reader.scan()), rounds)
    scan_warm = best_time(lambda: drain(reader.scan()), rounds)
    batches = best_time(cold_reader.read_table, rounds)
    write = best_time(lambda: encode_sst(table), rounds)
    store.delete("final.sst")
    value_len = len(table.column("value")[0].as_py())
    return [
        str(value_len),
        f"{warm:.2f}",
        f"{1e6 / warm:,.0f} ({1e6 / warm / SLATEDB_GETS_PER_S:.0f}x)",
        f"{snap_us:.2f}",
        f"{absent_us:.2f}",
        f"{cold:.1f}",
        f"{mixed:.1f}",
        f"{open_ms:.2f}",
        f"{logical / mb / scan_warm:.0f}",
        f"{logical / mb / scan_cold:.0f}",
        f"{logical / mb / batches:.0f}",
        f"{logical / mb / write:.0f}",
    ]


CONFIGS: list[tuple[str, int, str | None]] = [
    ("A: Arrow IPC blocks", 4 * 1024, "lz4"),
    ("A: Arrow IPC blocks", 16 * 1024, None),
    ("A: Arrow IPC blocks", 16 * 1024, "lz4"),
    ("A: Arrow IPC blocks", 16 * 1024, "zstd"),
    ("A: Arrow IPC blocks", 64 * 1024, "lz4"),
    ("B: Parquet row groups", 16 * 1024, "lz4"),
    ("B: Parquet row groups", 64 * 1024, "lz4"),
    ("B: Parquet row groups", 64 * 1024, "zstd"),
    ("B: Parquet row groups", 1024 * 1024, "lz4"),
]
QUICK_CONFIGS: list[tuple[str, int, str | None]] = [
    ("A: Arrow IPC blocks", 16 * 1024, "lz4"),
    ("B: Parquet row groups", 64 * 1024, "lz4"),
]


def run(entries: int, gets: int, rounds: int, quick: bool) -> tuple[list[Row], list[list[str]]]:
    """Every candidate at values of 100 and 400 B, then the shipped reader's timings (table rows)."""
    configs = QUICK_CONFIGS if quick else CONFIGS
    rows: list[Row] = []
    final: list[list[str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(tmp)
        for value_len in (100, 400):
            table = make_table(entries, value_len)
            keys = table.column("key").to_pylist()
            probe_keys = random.Random(1).choices(keys, k=gets)
            for candidate, block_size, compression in configs:
                row = measure(candidate, table, block_size, compression, store, probe_keys, rounds)
                rows.append(row)
                print(
                    f"{row.candidate} v{value_len} {block_size // 1024}K {row.compression}: "
                    f"warm {row.warm_get_us:.2f}us cold {row.cold_get_us:.1f}us",
                    file=sys.stderr,
                )
            final.append(final_reader_timings(table, store, probe_keys, rounds))
    return rows, final


def render_tables(rows: Sequence[Row], final: Sequence[Sequence[str]]) -> str:
    """The two tables (candidates, shipped reader) with their explanations, without a title."""
    lines = [
        "Warm get: block decoded in the cache. Cold get: no cache, the block is fetched with one ranged "
        "GET and decoded. Scan: every entry as a Python tuple (cold, no cache); batches: `read_table`.",
        "",
        markdown_table(CANDIDATE_COLUMNS, [_candidate_cells(r) for r in rows], "lrrlrrrrrrrr"),
        "",
        "The shipped reader (defaults: `SstOptions()`): µs per operation; cached get with and without "
        "`max_seq`; absent key (bloom / key-range rejection); cold get with no cache; 'small cache' = a "
        "4 MiB cache over the whole file (mostly misses). SlateDB's Python binding does "
        f"~{SLATEDB_GETS_PER_S:,} *database* gets/s; a get on one SST is an upper bound for a database get "
        "(memtables and other SSTs add to it).",
        "",
        markdown_table(READER_COLUMNS, final, "r" * len(READER_COLUMNS)),
    ]
    return "\n".join(lines)


CANDIDATE_COLUMNS = [
    "candidate", "value B", "block", "codec", "file MiB", "size/logical", "write MB/s", "open ms",
    "warm get µs", "cold get µs", "scan MB/s", "batches MB/s",
]  # fmt: skip
READER_COLUMNS = [
    "value B", "cached get µs", "gets/s on one SST (x SlateDB DB gets)", "get max_seq µs", "absent get µs",
    "cold get µs", "small-cache get µs", "open ms", "scan warm MB/s", "scan cold MB/s", "batches MB/s",
    "write MB/s",
]  # fmt: skip


def _candidate_cells(r: Row) -> list[object]:
    return [
        r.candidate, r.value_len, f"{r.block_size // 1024} KiB", r.compression, f"{r.file_mb:.1f}",
        f"{r.ratio:.2f}", f"{r.write_mbs:.0f}", f"{r.open_ms:.1f}", f"{r.warm_get_us:.2f}",
        f"{r.cold_get_us:.1f}", f"{r.scan_mbs:.0f}", f"{r.batches_mbs:.0f}",
    ]  # fmt: skip


def describe(entries: int, rounds: int) -> str:
    return (
        f"`benchmarks/bench_sst_formats.py`: {entries:,} entries per SST, random 16-20 B keys, "
        "values 2:1 compressible; LocalStore on a temp dir; best of "
        f"{rounds} rounds. Python {platform.python_version()}, pyarrow {pa.__version__}, "
        f"{platform.machine()}."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, RESULTS)
    parser.add_argument("--entries", type=int, default=200_000, help="rows per SST (default: %(default)s)")
    parser.add_argument(
        "--gets", type=int, default=20_000, help="warm point gets per round (default: %(default)s)"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="timed rounds, best kept (default: %(default)s)"
    )
    parser.add_argument("--quick", action="store_true", help="fewer configurations (default options only)")
    parser.add_argument("--no-write", action="store_true", help="print only, do not write the results file")
    args = parser.parse_args(argv)
    rows, final = run(args.entries, args.gets, args.rounds, args.quick)
    publish(render_report(rows, final, args.entries, args.rounds), None if args.no_write else output(args))
    return 0


def render_report(rows: Sequence[Row], final: Sequence[Sequence[str]], entries: int, rounds: int) -> str:
    return "\n".join(
        ["# SST format benchmark", "", describe(entries, rounds), "", render_tables(rows, final), ""]
    )


if __name__ == "__main__":
    sys.exit(main())
