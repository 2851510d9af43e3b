"""What object-store requests cost: counts by kind and bytes moved (:class:`RequestCounts`), a store
wrapper that meters them (:class:`MeteredStore`), and a configurable price table (:class:`PriceTable`).

Counting follows S3's billing units: a ``list`` is one request per page of :data:`LIST_PAGE_KEYS`
keys (the first page is counted when the call is made, each further page when it is reached), a
``head`` is billed like a ``get``. A request is counted when it is made, whether or not it then fails
(S3 bills failed requests too).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Final

from slate_ops.errors import InvalidArgumentError
from slate_ops.objstore.base import GetResult, ObjectMeta, ObjectStore, PutMode, PutResult

KINDS: Final = ("get", "head", "put", "list", "delete")
"""Request kinds, in the order reports show them."""

LIST_PAGE_KEYS: Final = 1000
"""Keys per LIST page on S3 (``ListObjectsV2``'s ``MaxKeys`` default and maximum)."""


def list_requests(keys: int) -> int:
    """The LIST requests that page through ``keys`` keys: one per :data:`LIST_PAGE_KEYS`, and one
    for none (an empty listing is still asked for)."""
    return max(1, -(-keys // LIST_PAGE_KEYS))


_OVERWRITE = PutMode.overwrite()


@dataclass(frozen=True)
class RequestCounts:
    """Object-store requests by kind and the bytes they moved (read by GETs, written by PUTs)."""

    get: int = 0
    head: int = 0
    put: int = 0
    list: int = 0
    delete: int = 0
    bytes_read: int = 0
    bytes_written: int = 0

    @property
    def requests(self) -> int:
        """Requests of every kind."""
        return self.get + self.head + self.put + self.list + self.delete

    def by_kind(self) -> dict[str, int]:
        """``{"get": n, "head": n, "put": n, "list": n, "delete": n}``."""
        return {kind: getattr(self, kind) for kind in KINDS}

    def to_dict(self) -> dict[str, int]:
        """Every field, for JSON reports and metadata; :meth:`from_dict` reads it back."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, values: Mapping[str, object]) -> RequestCounts:
        """The counts in ``values`` (unknown keys ignored, missing ones zero); a negative or non-integer
        count raises :class:`InvalidArgumentError`."""
        counts: dict[str, int] = {}
        for f in fields(cls):
            value = values.get(f.name, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidArgumentError(
                    f"request count {f.name!r} must be a non-negative integer, got {value!r}"
                )
            counts[f.name] = value
        return cls(**counts)

    def __add__(self, other: RequestCounts) -> RequestCounts:
        return RequestCounts(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def __sub__(self, other: RequestCounts) -> RequestCounts:
        """What happened between two snapshots of the same meter (``later - earlier``)."""
        return RequestCounts(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})

    def scaled(self, factor: float) -> RequestCounts:
        """Every count times ``factor``, rounded (e.g. per-poll counts times polls per day)."""
        return RequestCounts(**{f.name: round(getattr(self, f.name) * factor) for f in fields(self)})


ZERO: Final = RequestCounts()


@dataclass(frozen=True)
class PriceTable:
    """Dollars per 1,000 requests of each kind and per GB moved; what :meth:`cost` charges.

    Defaults: S3 Standard in us-east-1 as published on https://aws.amazon.com/s3/pricing/ (PUT, COPY,
    POST and LIST $0.005 per 1,000; GET, SELECT and all other requests, HEAD among them, $0.0004 per
    1,000; DELETE free; transfer into S3 and to compute in the same region free). Another region,
    storage class or provider: pass your own.
    """

    get_per_1000: float = 0.0004
    head_per_1000: float = 0.0004
    put_per_1000: float = 0.005
    list_per_1000: float = 0.005
    delete_per_1000: float = 0.0
    read_per_gb: float = 0.0
    written_per_gb: float = 0.0
    source: str = "S3 Standard, us-east-1 (https://aws.amazon.com/s3/pricing/)"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "source":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise InvalidArgumentError(f"price {f.name!r} must be a non-negative number, got {value!r}")
            if value < 0:
                raise InvalidArgumentError(f"price {f.name!r} must be a non-negative number, got {value!r}")

    def cost(self, counts: RequestCounts) -> float:
        """Dollars for ``counts``."""
        gb = 1024**3
        per_1000: float = sum(getattr(counts, kind) * getattr(self, f"{kind}_per_1000") for kind in KINDS)
        requests = per_1000 / 1000
        transfer = counts.bytes_read * self.read_per_gb + counts.bytes_written * self.written_per_gb
        return requests + transfer / gb


S3_STANDARD: Final = PriceTable()


def render_requests(counts: RequestCounts, prices: PriceTable = S3_STANDARD) -> str:
    """One line for people: ``12 GET, 3 PUT, 2 LIST, 0 DELETE, 1 HEAD; 4.1 MB read, 1.2 MB written;
    $0.000030`` (bytes in decimal MB, dollars at ``prices``)."""
    kinds = ", ".join(
        f"{getattr(counts, kind)} {kind.upper()}" for kind in ("get", "put", "list", "delete", "head")
    )
    moved = f"{counts.bytes_read / 1e6:.1f} MB read, {counts.bytes_written / 1e6:.1f} MB written"
    return f"{kinds}; {moved}; ${prices.cost(counts):.6f}"


class MeteredStore:
    """Wraps ``inner`` and meters every request it makes (:attr:`counts`); thread-safe.

    One meter per piece of work: wrap the store for an operation and read :attr:`counts` afterwards,
    or take two snapshots and subtract them.
    """

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys((f.name for f in fields(RequestCounts)), 0)

    @property
    def url(self) -> str:
        return self.inner.url

    @property
    def counts(self) -> RequestCounts:
        """Everything metered so far."""
        with self._lock:
            return RequestCounts(**self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts = dict.fromkeys(self._counts, 0)

    def _add(self, kind: str, nbytes: int = 0, field: str = "") -> None:
        with self._lock:
            if kind:
                self._counts[kind] += 1
            if field:
                self._counts[field] += nbytes

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        self._add("get")
        result = self.inner.get(key, byte_range)
        self._add("", len(result.data), "bytes_read")
        return result

    def head(self, key: str) -> ObjectMeta:
        self._add("head")
        return self.inner.head(key)

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        self._add("put", len(data), "bytes_written")
        return self.inner.put(key, data, mode, put_id)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        self._add("list")
        return self._paged(self.inner.list(prefix, start_after))

    def _paged(self, listing: Iterator[ObjectMeta]) -> Iterator[ObjectMeta]:
        for index, meta in enumerate(listing):
            if index and index % LIST_PAGE_KEYS == 0:
                self._add("list")
            yield meta

    def delete(self, key: str) -> None:
        self._add("delete")
        self.inner.delete(key)
