"""A thread-safe LRU cache of decoded blocks, bounded in (estimated) bytes."""

from __future__ import annotations

import threading
from collections import OrderedDict

from slate_ops.errors import InvalidArgumentError
from slate_ops.sst.block import Block

CacheKey = tuple[str, int]  # (SST identity, block number)


class BlockCache:
    """LRU over decoded blocks, shared by any number of :class:`SstReader` s and threads.

    Each block is charged its :attr:`Block.charge` (key and value bytes plus a per-row estimate of
    Python object overhead). Inserting evicts least-recently-used blocks until the total fits;
    a block larger than the whole capacity is not cached. Two threads missing the same block may
    both decode it (no single-flight): the second insert simply replaces the first.
    """

    def __init__(self, capacity_bytes: int) -> None:
        if not isinstance(capacity_bytes, int) or capacity_bytes < 0:
            raise InvalidArgumentError(
                f"BlockCache capacity must be a non-negative int, got {capacity_bytes!r}"
            )
        self._capacity = capacity_bytes
        self._lock = threading.Lock()
        self._blocks: OrderedDict[CacheKey, Block] = OrderedDict()
        self._size = 0
        self._hits = 0
        self._misses = 0

    @property
    def capacity_bytes(self) -> int:
        return self._capacity

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def hits(self) -> int:
        return self._hits

    @property
    def misses(self) -> int:
        return self._misses

    def __len__(self) -> int:
        return len(self._blocks)

    def get(self, key: CacheKey) -> Block | None:
        with self._lock:
            block = self._blocks.get(key)
            if block is None:
                self._misses += 1
                return None
            self._blocks.move_to_end(key)
            self._hits += 1
            return block

    def put(self, key: CacheKey, block: Block) -> None:
        charge = block.charge
        with self._lock:
            old = self._blocks.pop(key, None)
            if old is not None:
                self._size -= old.charge
            if charge > self._capacity:
                return
            self._blocks[key] = block
            self._size += charge
            while self._size > self._capacity:
                _, evicted = self._blocks.popitem(last=False)
                self._size -= evicted.charge

    def clear(self) -> None:
        """Drop every block; the hit and miss counters are kept."""
        with self._lock:
            self._blocks.clear()
            self._size = 0
