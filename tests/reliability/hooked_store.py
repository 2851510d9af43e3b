"""A store view that sends each call through one hook, for the schedulers that run real threads
one store call at a time (the adversary's :mod:`tests.reliability.sim.interleave` and the
interleaving explorer, :mod:`tests.reliability.interleavings.explorer`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from slate_ops.objstore.base import GetResult, ObjectMeta, ObjectStore, PutMode, PutResult

_R = TypeVar("_R")
_OVERWRITE = PutMode.overwrite()


class HookedStore:
    """Delegates every call to ``inner`` through :meth:`_call` (``op``, ``key``, the call itself).

    A LIST is materialised inside the hook, so its request happens at the moment the hook lets it,
    not when the caller iterates."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner

    @property
    def url(self) -> str:
        return self.inner.url

    def _call(self, op: str, key: str, call: Callable[[], _R]) -> _R:
        raise NotImplementedError

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        return self._call("get", key, lambda: self.inner.get(key, byte_range))

    def head(self, key: str) -> ObjectMeta:
        return self._call("head", key, lambda: self.inner.head(key))

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        return self._call("put", key, lambda: self.inner.put(key, data, mode, put_id))

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        return self._call("list", prefix, lambda: iter(list(self.inner.list(prefix, start_after))))

    def delete(self, key: str) -> None:
        self._call("delete", key, lambda: self.inner.delete(key))
