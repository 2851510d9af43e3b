"""Reading an SST from an object store: ranged GETs, verified blocks, point gets and scans."""

from __future__ import annotations

import itertools
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from slate_ops.errors import CorruptObjectError
from slate_ops.manifest.model import SstInfo
from slate_ops.objstore.base import ObjectStore
from slate_ops.sst.block import Block, decode_batch, decode_block
from slate_ops.sst.bloom import BloomFilter
from slate_ops.sst.cache import BlockCache
from slate_ops.sst.format import (
    BLOCK_TRAILER_LEN,
    INDEX_SCHEMA,
    MIN_FILE_LEN,
    ORDER_KEY,
    SCHEMA,
    Footer,
    decode_footer,
    footer_length,
    unframe_block,
)
from slate_ops.sst.writer import Entry

# The first GET of an SST reads this much of its tail (or the whole file if smaller), sized so it
# usually holds the footer, index and bloom filter: ~1-3 % of an SST with 16 KiB blocks.
MIN_TAIL_BYTES = 64 * 1024
TAIL_FRACTION = 32
# Scans fetch runs of adjacent blocks with one GET each, growing from one block (short scans stay
# cheap) by doubling to this size; batch scans (compaction) start at SCAN_BATCHES_FIRST_BYTES.
MAX_READAHEAD_BYTES = 8 * 1024 * 1024
SCAN_BATCHES_FIRST_BYTES = 1024 * 1024

# Everything that parsing checksum-valid but malformed bytes can raise; always reported as corrupt.
# (pyarrow reports a malformed IPC message as a plain OSError; decoding only reads memory, so an
# OSError here is never an I/O failure.)
_DECODE_ERRORS = (pa.ArrowException, OSError, ValueError, TypeError, IndexError, KeyError, struct.error)


@dataclass(frozen=True)
class BlockIndex:
    """An SST's index, one entry per data block: its key and sequence-number bounds and where its
    bytes are (``offsets[i]`` to ``ends[i]``, its trailer included)."""

    first_keys: tuple[bytes, ...]
    last_keys: tuple[bytes, ...]
    first_seqs: tuple[int, ...]
    last_seqs: tuple[int, ...]
    offsets: tuple[int, ...]
    ends: tuple[int, ...]


class SstReader:
    """An open SST: footer, index and bloom filter in memory; data blocks on demand.

    Thread-safe: after :meth:`open` a reader is immutable; blocks are shared through the
    :class:`BlockCache` (``cache=None``: no caching, every get reads its block from the store).
    """

    info: SstInfo
    order: str
    num_blocks: int

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        footer: Footer,
        size: int,
        index: pa.RecordBatch,
        bloom: BloomFilter | None,
        cache: BlockCache | None,
        cache_id: str,
        resident: bytes | None,
    ) -> None:
        """Use :meth:`open`."""
        self._store = store
        self._key = key
        self._cache = cache
        self._cache_id = cache_id
        self._bloom = bloom
        self._resident = resident
        self.order = footer.order
        self.num_blocks = footer.num_blocks
        self._is_key_order = footer.order == ORDER_KEY
        self.info = SstInfo(
            first_key=footer.first_key,
            last_key=footer.last_key,
            size_bytes=size,
            num_entries=footer.num_entries,
            min_seq=footer.min_seq,
            max_seq=footer.max_seq,
            format_version=footer.version,
        )
        self._first_keys: list[bytes] = index.column(0).to_pylist()
        self._last_keys: list[bytes] = index.column(1).to_pylist()
        self._first_seqs: list[int] = index.column(2).to_pylist()
        self._last_seqs: list[int] = index.column(3).to_pylist()
        self._offsets: list[int] = index.column(4).to_pylist()
        self._ends: list[int] = [
            o + s for o, s in zip(self._offsets, index.column(5).to_pylist(), strict=True)
        ]

    # --- opening -----------------------------------------------------------------------------

    @classmethod
    def open(
        cls, store: ObjectStore, key: str, *, size: int | None = None, cache: BlockCache | None = None
    ) -> SstReader:
        """Read and verify the footer, index and bloom filter of SST ``key``.

        With ``size`` (from the manifest) this is usually one ranged GET of the file's tail;
        without it, a HEAD first. A truncated or damaged file raises :class:`CorruptObjectError`
        naming ``key``; an intact file of an unknown format version raises
        :class:`UnsupportedFormatVersionError`.
        """
        if size is None:
            size = store.head(key).size
        if size < MIN_FILE_LEN:
            raise CorruptObjectError(key, f"file is {size} bytes, too short for an SST")
        tail_len = min(size, max(MIN_TAIL_BYTES, size // TAIL_FRACTION))
        result = store.get(key, (size - tail_len, size))
        tail = _exact(key, result.data, tail_len, "the file's tail")
        footer_len = footer_length(key, tail)
        if footer_len > tail_len and footer_len <= size:  # huge first/last keys: refetch, with index
            tail_len = min(size, footer_len + tail_len)
            tail = _exact(key, store.get(key, (size - tail_len, size)).data, tail_len, "the footer")
        footer = decode_footer(key, tail, size)
        tail_start = size - tail_len
        meta_start = footer.index_offset
        if meta_start >= tail_start:
            meta = memoryview(tail)[meta_start - tail_start : size - footer_len - tail_start]
        else:
            head = store.get(key, (meta_start, tail_start)).data
            head = _exact(key, head, tail_start - meta_start, "the index")
            meta = memoryview(head + tail)[: size - footer_len - meta_start]
        index = _decode_index(key, meta[: footer.index_size], footer)
        bloom = None
        if footer.bloom_size:
            raw = unframe_block(key, "bloom filter", meta[footer.index_size :])
            try:
                bloom = BloomFilter.decode(memoryview(raw))
            except ValueError as exc:
                raise CorruptObjectError(key, f"bloom filter: {exc}") from exc
        cache_id = f"{store.url}\x00{key}\x00{result.meta.etag}"
        resident = tail if tail_len == size else None
        return cls(store, key, footer, size, index, bloom, cache, cache_id, resident)

    # --- point reads -------------------------------------------------------------------------

    def may_contain(self, key: bytes) -> bool:
        """False if ``key`` is certainly absent (outside the key range, or by the bloom filter)."""
        info = self.info
        if not info.first_key <= key <= info.last_key or not self.num_blocks:
            return False
        return self._bloom is None or self._bloom.may_contain(key)

    def get(self, key: bytes, max_seq: int | None = None) -> Entry | None:
        """The newest entry for ``key`` with ``seq <= max_seq`` (any seq if None), tombstones included.

        Key-ordered files: the index of per-block key ranges picks the one block that can hold it
        (a key in a gap between blocks costs nothing); a cached block answers with two bisects; on
        a cache miss the bloom filter is consulted before the block is fetched. Seq-ordered (WAL)
        files have no bloom filter: a get checks every block whose key and seq ranges admit the key,
        newest first.
        """
        if not self._is_key_order:
            return self._get_seq_ordered(key, max_seq)
        last_keys = self._last_keys
        i = bisect_left(last_keys, key)  # the first block whose last key >= key
        if max_seq is not None:
            n = self.num_blocks
            last_seqs = self._last_seqs
            # Versions of key may continue over several blocks; skip those holding only newer ones.
            while i < n and last_keys[i] == key and last_seqs[i] > max_seq:
                i += 1
        if i == self.num_blocks or key < self._first_keys[i]:
            return None
        block = None
        cache = self._cache
        if cache is not None:
            block = cache.get((self._cache_id, i))
        if block is None:
            bloom = self._bloom
            if bloom is not None and not bloom.may_contain(key):
                return None
            block = self._load_block(i)
        keys = block.keys
        pos = bisect_left(keys, key)
        if keys[pos] != key:
            return None
        seqs = block.seqs
        if max_seq is not None and seqs[pos] > max_seq:
            hi = bisect_right(keys, key, pos)
            pos = bisect_left(seqs, -max_seq, pos, hi, key=_neg)
            if pos == hi:  # every version of key here is newer than max_seq
                return None
        return (key, seqs[pos], block.kinds[pos], block.values[pos])

    def _get_seq_ordered(self, key: bytes, max_seq: int | None) -> Entry | None:
        for i in range(self.num_blocks - 1, -1, -1):
            if max_seq is not None and self._first_seqs[i] > max_seq:
                continue
            if not self._first_keys[i] <= key <= self._last_keys[i]:
                continue
            block = self.block(i)
            keys, seqs = block.keys, block.seqs
            for pos in reversed([p for p, k in enumerate(keys) if k == key]):
                if max_seq is None or seqs[pos] <= max_seq:
                    return (key, seqs[pos], block.kinds[pos], block.values[pos])
        return None

    # --- scans -------------------------------------------------------------------------------

    def scan(
        self, start: bytes | None = None, end: bytes | None = None, *, fill_cache: bool = True
    ) -> Iterator[Entry]:
        """Entries with ``start <= key < end`` in file order, loading only the blocks that overlap.

        Key order gives (key asc, seq desc); seq-ordered files yield every entry in the range in
        seq order. Blocks come from the cache when present; missing runs of blocks are fetched with
        one GET per run, growing read-ahead; ``fill_cache=False`` keeps a long scan from evicting
        the cache's working set.
        """
        if start is not None and end is not None and start >= end:
            return
        lo, hi = self._block_range(start, end)
        for block in self._blocks(lo, hi, start, end, fill_cache):
            yield from self.rows(block, start, end)

    def rows(self, block: Block, start: bytes | None, end: bytes | None) -> Iterator[Entry]:
        """The entries of ``block`` (one of this file's) with ``start <= key < end``, in file order."""
        keys = block.keys
        rows = zip(keys, block.seqs, block.kinds, block.values, strict=True)
        if self._is_key_order:
            a = 0 if start is None or keys[0] >= start else bisect_left(keys, start)
            b = len(keys) if end is None or keys[-1] < end else bisect_left(keys, end)
            if a == 0 and b == len(keys):
                yield from rows
            else:
                yield from itertools.islice(rows, a, b)
        elif start is None and end is None:
            yield from rows
        else:
            for row in rows:
                k = row[0]
                if (start is None or k >= start) and (end is None or k < end):
                    yield row

    def scan_runs(
        self, start: bytes | None, end: bytes | None, first_bytes: int, growth: int, max_bytes: int
    ) -> list[tuple[int, int, list[Block] | None]]:
        """The steps of a scan of ``[start, end)`` for read-ahead (:mod:`slate_ops.sst.readahead`):
        ``(i, j, blocks)``, blocks ``i..j-1`` either found in the cache (``blocks``) or a run to
        fetch with one GET (None): the first run up to ``first_bytes``, the next ones growing by
        ``growth`` up to ``max_bytes`` (each at least one block). Cached blocks are looked up (and
        held) now."""
        if start is not None and end is not None and start >= end:
            return []
        lo, hi = self._block_range(start, end)
        prune = not self._is_key_order and (start is not None or end is not None)
        cache, cache_id = self._cache, self._cache_id

        def wanted(b: int) -> bool:
            return not prune or self._overlaps(b, start, end)

        def cached(b: int) -> Block | None:
            return None if cache is None else cache.get((cache_id, b))

        steps: list[tuple[int, int, list[Block] | None]] = []
        target = min(max_bytes, first_bytes)
        i = lo
        while i < hi:
            if not wanted(i):
                i += 1
                continue
            block = cached(i)
            if block is not None:
                if steps and steps[-1][2] is not None and steps[-1][1] == i:
                    blocks = steps[-1][2]
                    assert blocks is not None
                    blocks.append(block)
                    steps[-1] = (steps[-1][0], i + 1, blocks)
                else:
                    steps.append((i, i + 1, [block]))
                i += 1
                continue
            j = i + 1
            stop = self._run_end(i, hi, target)
            while j < stop and wanted(j):
                block = cached(j)
                if block is not None:  # the next step starts with it
                    steps.append((i, j, None))
                    steps.append((j, j + 1, [block]))
                    i = j = j + 1
                    break
                j += 1
            else:
                steps.append((i, j, None))
                i = j
            target = min(max_bytes, target * growth)
        return steps

    def run_bytes(self, i: int, j: int) -> int:
        """Stored bytes of blocks ``i..j-1`` (what one GET of them reads)."""
        return self._ends[j - 1] - self._offsets[i]

    def scan_batches(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[pa.RecordBatch]:
        """The rows of :meth:`scan` as record batches in :data:`SCHEMA` (for vectorized compaction).

        Bypasses the block cache: blocks are fetched in runs (1 MiB growing to 8 MiB per GET) and
        each run becomes one batch (:meth:`read_run`).
        """
        if start is not None and end is not None and start >= end:
            return
        lo, hi = self._block_range(start, end)
        target = SCAN_BATCHES_FIRST_BYTES
        i = lo
        while i < hi:
            j = self._run_end(i, hi, target)
            target = min(MAX_READAHEAD_BYTES, 2 * target)
            batch = self.read_run(i, j, start, end)
            if batch is not None:
                yield batch
            i = j

    def plan_runs(self, start: bytes | None, end: bytes | None, max_bytes: int) -> list[tuple[int, int]]:
        """Runs of blocks ``[i, j)`` of at most ``max_bytes`` (at least one block each) that cover a
        scan of ``[start, end)``: one ranged GET each, for callers that fetch them in parallel."""
        if start is not None and end is not None and start >= end:
            return []
        lo, hi = self._block_range(start, end)
        runs = []
        while lo < hi:
            j = self._run_end(lo, hi, max_bytes)
            runs.append((lo, j))
            lo = j
        return runs

    def read_run(
        self, i: int, j: int, start: bytes | None = None, end: bytes | None = None
    ) -> pa.RecordBatch | None:
        """Blocks ``i..j-1`` fetched with one GET, verified and decoded into one batch of the rows in
        ``[start, end)`` (boundary blocks range-filtered with ``pyarrow.compute``); None if no rows."""
        return self.decode_run(i, j, self.fetch_run(i, j), start, end)

    def decode_run(
        self,
        i: int,
        j: int,
        framed: Mapping[int, bytes | memoryview],
        start: bytes | None = None,
        end: bytes | None = None,
    ) -> pa.RecordBatch | None:
        """As :meth:`read_run`, from blocks ``i..j-1`` already fetched (``framed``, by block number,
        as :meth:`fetch_run` returns them): verified and decoded here."""
        key_order = self._is_key_order
        first_keys, last_keys = self._first_keys, self._last_keys
        prune = not key_order and (start is not None or end is not None)
        batches = []
        for b in range(i, j):
            if prune and not self._overlaps(b, start, end):
                continue
            batch = self._decode(b, framed[b])
            lower = start is not None and first_keys[b] < start
            upper = end is not None and last_keys[b] >= end
            if lower or upper or prune:
                batch = batch.filter(_range_mask(batch.column(0), start, end))
            if batch.num_rows:
                batches.append(batch)
        if not batches:
            return None
        return batches[0] if len(batches) == 1 else pa.concat_batches(batches)

    @property
    def has_bloom(self) -> bool:
        return self._bloom is not None

    def block_index(self) -> BlockIndex:
        return BlockIndex(
            tuple(self._first_keys),
            tuple(self._last_keys),
            tuple(self._first_seqs),
            tuple(self._last_seqs),
            tuple(self._offsets),
            tuple(self._ends),
        )

    def block_sizes(self) -> list[tuple[bytes, int]]:
        """``(first key, stored bytes)`` of every block, from the index: for planning splits."""
        return [(k, e - o) for k, o, e in zip(self._first_keys, self._offsets, self._ends, strict=True)]

    def stored_bytes(self, start: bytes | None = None, end: bytes | None = None) -> int:
        """Stored (compressed) bytes of the blocks a scan of ``[start, end)`` reads."""
        lo, hi = self._block_range(start, end)
        return sum(self._ends[i] - self._offsets[i] for i in range(lo, hi) if self._overlaps(i, start, end))

    def read_table(self) -> pa.Table:
        """Every row of the file, in file order."""
        return pa.Table.from_batches(list(self.scan_batches()), schema=SCHEMA)

    # --- blocks ------------------------------------------------------------------------------

    def _block_range(self, start: bytes | None, end: bytes | None) -> tuple[int, int]:
        """Blocks ``[lo, hi)`` that may hold keys in ``[start, end)``: by position for key-ordered
        files; seq-ordered files return all blocks (``_blocks`` skips the non-overlapping ones)."""
        if not self._is_key_order:
            return 0, self.num_blocks
        lo = 0 if start is None else bisect_left(self._last_keys, start)
        hi = self.num_blocks if end is None else bisect_left(self._first_keys, end)
        return lo, max(lo, hi)

    def _overlaps(self, i: int, start: bytes | None, end: bytes | None) -> bool:
        return (start is None or self._last_keys[i] >= start) and (end is None or self._first_keys[i] < end)

    def block(self, i: int) -> Block:
        """Block ``i``, from the cache, else fetched (one GET), verified, decoded and cached."""
        cache = self._cache
        if cache is not None:
            block = cache.get((self._cache_id, i))
            if block is not None:
                return block
        return self._load_block(i)

    def _load_block(self, i: int) -> Block:
        """Fetch, verify and decode block ``i`` (one ranged GET), and cache it."""
        start, end = self._offsets[i], self._ends[i]
        return self.decode_framed(i, self._fetch(start, end, f"block {i}"), True)

    def decode_framed(self, i: int, framed: bytes | memoryview, fill_cache: bool) -> Block:
        raw = unframe_block(self._key, f"block {i}", framed)
        try:
            block = decode_block(raw)
        except _DECODE_ERRORS as exc:
            raise CorruptObjectError(self._key, f"block {i} does not decode: {exc}") from exc
        if self._is_key_order and (
            block.keys[0] != self._first_keys[i] or block.keys[-1] != self._last_keys[i]
        ):
            raise CorruptObjectError(self._key, f"block {i} does not match its index entry")
        if fill_cache and self._cache is not None:
            self._cache.put((self._cache_id, i), block)
        return block

    def _decode(self, i: int, framed: bytes | memoryview) -> pa.RecordBatch:
        raw = unframe_block(self._key, f"block {i}", framed)
        try:
            return decode_batch(raw)
        except _DECODE_ERRORS as exc:
            raise CorruptObjectError(self._key, f"block {i} does not decode: {exc}") from exc

    def _blocks(
        self, lo: int, hi: int, start: bytes | None, end: bytes | None, fill_cache: bool
    ) -> Iterator[Block]:
        """Decoded blocks ``lo..hi-1`` (for seq-ordered files only those overlapping the range),
        from the cache when present, else from runs fetched with growing read-ahead."""
        cache = self._cache
        cache_id = self._cache_id
        prune = not self._is_key_order and (start is not None or end is not None)
        run: dict[int, memoryview] = {}
        target = 0  # the first run is a single block: a short scan reads no more than it needs
        for i in range(lo, hi):
            if prune and not self._overlaps(i, start, end):
                continue
            if cache is not None:
                block = cache.get((cache_id, i))
                if block is not None:
                    yield block
                    continue
            framed = run.pop(i, None)
            if framed is None:
                run = self.fetch_run(i, self._run_end(i, hi, target))
                target = min(MAX_READAHEAD_BYTES, max(2 * target, 64 * 1024))
                framed = run.pop(i)
            yield self.decode_framed(i, framed, fill_cache)

    def _run_end(self, i: int, hi: int, target: int) -> int:
        """The end of the run of blocks from ``i`` spanning at most ``target`` bytes (>= 1 block)."""
        return max(i + 1, min(hi, bisect_right(self._ends, self._offsets[i] + target, i)))

    def fetch_run(self, i: int, j: int) -> dict[int, memoryview]:
        """Blocks ``i..j-1`` fetched with one GET, as framed bytes by block number."""
        offsets, ends = self._offsets, self._ends
        base = offsets[i]
        data = memoryview(self._fetch(base, ends[j - 1], f"blocks {i}..{j - 1}"))
        return {b: data[offsets[b] - base : ends[b] - base] for b in range(i, j)}

    def _fetch(self, start: int, end: int, what: str) -> bytes:
        if self._resident is not None:
            return self._resident[start:end]
        data = self._store.get(self._key, (start, end)).data
        return _exact(self._key, data, end - start, what)


def _neg(seq: int) -> int:
    return -seq


def _range_mask(keys: pa.Array, start: bytes | None, end: bytes | None) -> pa.Array:
    if start is not None and end is not None:
        return pc.and_(pc.greater_equal(keys, start), pc.less(keys, end))
    if start is not None:
        return pc.greater_equal(keys, start)
    return pc.less(keys, end)


def _exact(path: str, data: bytes, expected: int, what: str) -> bytes:
    if len(data) != expected:
        raise CorruptObjectError(path, f"truncated: read {len(data)} of {expected} bytes of {what}")
    return data


def _decode_index(path: str, framed: memoryview, footer: Footer) -> pa.RecordBatch:
    raw = unframe_block(path, "index", framed)
    try:
        index = ipc.read_record_batch(raw, INDEX_SCHEMA)
        if index.num_rows != footer.num_blocks or any(col.null_count for col in index.columns):
            raise ValueError(f"index has {index.num_rows} rows for {footer.num_blocks} blocks")
        index.validate(full=True)
        offsets = index.column(4).to_pylist()
        sizes = index.column(5).to_pylist()
    except _DECODE_ERRORS as exc:
        raise CorruptObjectError(path, f"index does not decode: {exc}") from exc
    expected = 0
    for offset, size in zip(offsets, sizes, strict=True):
        if offset != expected or size < BLOCK_TRAILER_LEN:
            raise CorruptObjectError(path, "index block offsets are inconsistent")
        expected += size
    if expected != footer.index_offset:
        raise CorruptObjectError(path, "index block offsets do not end at the index")
    return index
