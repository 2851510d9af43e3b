"""A bloom filter whose probe is a handful of Python operations, built vectorized with numpy.

Hashing: ``x = zlib.crc32(key)`` (the cheapest well-mixed 32-bit hash in the standard library,
~0.1 µs), then Kirsch-Mitzenmacher double hashing ``pos_i = (x + i * y) mod m`` for i < k, where
``y = ((x * GOLDEN) mod 2^64) >> 32 | 1``. Every probe position is a function of the 32-bit ``x``,
which only adds the chance of a 32-bit collision (n / 2^32, < 0.03 % at a million keys) to the
false-positive rate; ``tests/sst/test_bloom.py`` checks the measured rate against theory.

Payload (inside a framed block): ``num_bits u32 | num_probes u8 | bits``, bit ``p`` is
``bits[p >> 3] >> (p & 7) & 1``.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence

import numpy as np

_GOLDEN = 0x9E3779B97F4A7C15
_M64 = (1 << 64) - 1
_HEADER = struct.Struct("<IB")
_MAX_BITS = 0xFFFFFFFF


def num_probes_for(bits_per_key: int) -> int:
    """The k minimising the false-positive rate, ``bits_per_key * ln 2``, within [1, 30]."""
    return max(1, min(30, round(bits_per_key * math.log(2))))


def theoretical_fpr(bits_per_key: float, num_probes: int) -> float:
    return float((1.0 - math.exp(-num_probes / bits_per_key)) ** num_probes)


class BloomFilter:
    """An immutable bloom filter over byte-string keys."""

    __slots__ = ("_bits", "_num_bits", "_num_probes")

    def __init__(self, bits: bytes, num_bits: int, num_probes: int) -> None:
        if not 0 < num_bits <= len(bits) * 8 or not 0 < num_probes <= 30:
            raise ValueError(f"bad bloom filter shape: {num_bits} bits, {num_probes} probes")
        self._bits = bits
        self._num_bits = num_bits
        self._num_probes = num_probes

    @classmethod
    def build(cls, keys: Sequence[bytes], bits_per_key: int) -> BloomFilter:
        """A filter over ``keys`` (duplicates cost nothing but a hash) with ``bits_per_key`` bits each."""
        n = len(keys)
        num_bits = min(_MAX_BITS, max(64, n * bits_per_key))
        k = num_probes_for(bits_per_key)
        x = np.fromiter(map(zlib.crc32, keys), dtype=np.uint64, count=n)
        y = ((x * np.uint64(_GOLDEN)) >> np.uint64(32)) | np.uint64(1)
        hit = np.zeros(num_bits, dtype=np.bool_)
        m = np.uint64(num_bits)
        for i in range(k):
            hit[(x + np.uint64(i) * y) % m] = True
        bits = np.packbits(hit, bitorder="little").tobytes()
        return cls(bits, num_bits, k)

    def encode(self) -> bytes:
        return _HEADER.pack(self._num_bits, self._num_probes) + self._bits

    @classmethod
    def decode(cls, payload: bytes | memoryview) -> BloomFilter:
        """Parse :meth:`encode`'s output; ``ValueError`` if it is malformed."""
        if len(payload) < _HEADER.size:
            raise ValueError("bloom filter payload is too short")
        num_bits, k = _HEADER.unpack_from(payload)
        bits = bytes(payload[_HEADER.size :])
        if len(bits) != (num_bits + 7) // 8:
            raise ValueError(f"bloom filter has {len(bits)} bytes for {num_bits} bits")
        return cls(bits, num_bits, k)

    @property
    def num_bits(self) -> int:
        return self._num_bits

    @property
    def num_probes(self) -> int:
        return self._num_probes

    def may_contain(self, key: bytes) -> bool:
        """False only if ``key`` was certainly not added (no false negatives)."""
        x = zlib.crc32(key)
        y = (((x * _GOLDEN) & _M64) >> 32) | 1
        bits = self._bits
        m = self._num_bits
        for _ in range(self._num_probes):
            p = x % m
            if not bits[p >> 3] >> (p & 7) & 1:
                return False
            x += y
        return True
