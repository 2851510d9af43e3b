"""A read-only store view of one object already fetched into memory, so that a reader written
against :class:`~slate_ops.objstore.base.ObjectStore` (e.g. ``SstReader``) decodes it without
another request (the WAL replay fetches each WAL SST whole with one GET: ``engine/wal_store.py``)."""

from __future__ import annotations

from collections.abc import Iterator

from slate_ops.errors import ObjectNotFoundError
from slate_ops.objstore.base import GetResult, ObjectMeta, PutMode, PutResult


class FetchedObject:
    """Serves GET (whole or ranged) and HEAD of the one object ``key`` from ``got``; refuses writes."""

    def __init__(self, url: str, key: str, got: GetResult) -> None:
        self.url = url
        self._key = key
        self._got = got

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        self._check(key)
        data = self._got.data
        return GetResult(data if byte_range is None else data[byte_range[0] : byte_range[1]], self._got.meta)

    def head(self, key: str) -> ObjectMeta:
        self._check(key)
        return self._got.meta

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        raise NotImplementedError("a fetched object is read only")

    def put(self, key: str, data: bytes, mode: PutMode | None = None, put_id: str | None = None) -> PutResult:
        raise NotImplementedError("a fetched object is read only")

    def delete(self, key: str) -> None:
        raise NotImplementedError("a fetched object is read only")

    def _check(self, key: str) -> None:
        if key != self._key:
            raise ObjectNotFoundError(f"{key} is not the fetched object {self._key}", key)
