"""An in-process store (``memory://``): a dict guarded by a lock. For tests and benchmarks."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from slate_ops.errors import ObjectNotFoundError, PreconditionFailedError
from slate_ops.objstore.base import (
    GetResult,
    ObjectMeta,
    PutMode,
    PutResult,
    new_put_id,
    validate_key,
    validate_range,
)

_OVERWRITE = PutMode.overwrite()  # a module constant: ruff B008 forbids calls in defaults


@dataclass(frozen=True)
class _Entry:
    data: bytes
    meta: ObjectMeta


class MemoryStore:
    """Thread-safe, strongly consistent; ``now`` is injectable so tests control ``last_modified``."""

    def __init__(self, name: str = "", now: Callable[[], datetime] | None = None) -> None:
        self._name = name
        self._now = now or (lambda: datetime.now(UTC))
        self._objects: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._version = 0

    @property
    def url(self) -> str:
        return f"memory://{self._name}"

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        validate_key(key)
        validate_range(key, byte_range)
        with self._lock:
            entry = self._objects.get(key)
        if entry is None:
            raise ObjectNotFoundError(f"{self.url}/{key} does not exist", key)
        data = entry.data if byte_range is None else entry.data[byte_range[0] : byte_range[1]]
        return GetResult(data, entry.meta)

    def head(self, key: str) -> ObjectMeta:
        validate_key(key)
        with self._lock:
            entry = self._objects.get(key)
        if entry is None:
            raise ObjectNotFoundError(f"{self.url}/{key} does not exist", key)
        return entry.meta

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        validate_key(key)
        put_id = put_id or new_put_id()
        with self._lock:
            current = self._objects.get(key)
            if mode.kind == "create" and current is not None:
                raise PreconditionFailedError(f"{self.url}/{key} already exists", key)
            if mode.kind == "if_match" and (current is None or current.meta.etag != mode.etag):
                raise PreconditionFailedError(f"{self.url}/{key} does not match etag {mode.etag}", key)
            self._version += 1
            etag = f"m{self._version}"
            meta = ObjectMeta(key, len(data), self._now(), etag, put_id)
            self._objects[key] = _Entry(bytes(data), meta)
        return PutResult(etag, put_id)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        with self._lock:
            metas = [e.meta for k, e in self._objects.items() if k.startswith(prefix)]
        metas.sort(key=lambda m: m.key)
        return iter([m for m in metas if start_after is None or m.key > start_after])

    def delete(self, key: str) -> None:
        validate_key(key)
        with self._lock:
            self._objects.pop(key, None)
