"""Store wrappers for tests and benchmarks: request counting (a view of :class:`MeteredStore`) and
deterministic fault injection."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from slate_ops.errors import InvalidArgumentError, ObjectStoreError, PutOutcomeUnknownError
from slate_ops.objstore.base import (
    GetResult,
    ObjectMeta,
    ObjectStore,
    PutMode,
    PutResult,
    new_put_id,
)
from slate_ops.objstore.metering import KINDS, MeteredStore
from slate_ops.runtime import seeded_random

_OVERWRITE = PutMode.overwrite()  # a module constant: ruff B008 forbids calls in defaults

OPS = KINDS
_T = TypeVar("_T")


class CountingStore:
    """Requests per kind as a plain dict (:attr:`counts`, :attr:`total`), e.g. to check a read
    path's cost in a test: a view of one :class:`~slate_ops.objstore.metering.MeteredStore`
    (:attr:`meter`), which does the counting (S3 billing units: a ``list`` is one request per page
    of 1,000 keys; a call is counted when made, whether or not it then fails).
    """

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.meter = MeteredStore(inner)

    @property
    def url(self) -> str:
        return self.inner.url

    @property
    def counts(self) -> dict[str, int]:
        """``{"get": n, "head": n, "put": n, "list": n, "delete": n}`` (a copy)."""
        return self.meter.counts.by_kind()

    @property
    def total(self) -> int:
        return self.meter.counts.requests

    def reset(self) -> None:
        self.meter.reset()

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        return self.meter.get(key, byte_range)

    def head(self, key: str) -> ObjectMeta:
        return self.meter.head(key)

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        return self.meter.put(key, data, mode, put_id)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        return self.meter.list(prefix, start_after)

    def delete(self, key: str) -> None:
        self.meter.delete(key)


class SimulatedCrash(Exception):
    """The process "died" here. Deliberately not a SlateOpsError, so no handler catches it."""


ErrorSpec = BaseException | type[BaseException] | None


@dataclass
class _Rule:
    op: str
    key_contains: str | None
    remaining: int | None  # None: forever
    error: ErrorSpec
    probability: float
    after: bool  # apply the call to the inner store, then raise

    def matches(self, op: str, key: str) -> bool:
        return (
            self.op == op
            and (self.remaining is None or self.remaining > 0)
            and (self.key_contains is None or self.key_contains in key)
        )


@dataclass
class Gate:
    """Parks matching calls until :meth:`release`; lets a test freeze a call mid-flight."""

    op: str
    key_contains: str | None
    _reached: threading.Event = field(default_factory=threading.Event, init=False)
    _released: threading.Event = field(default_factory=threading.Event, init=False)

    def release(self) -> None:
        self._released.set()

    def wait_until_reached(self, timeout: float | None = None) -> bool:
        """True once a call is parked at (or has passed) the gate; False on timeout."""
        return self._reached.wait(timeout)

    def park_if_matching(self, op: str, key: str) -> None:
        """Called by the store before each call: parks a matching one until :meth:`release`."""
        if op != self.op or (self.key_contains is not None and self.key_contains not in key):
            return
        self._reached.set()
        self._released.wait()


class FaultInjectingStore:
    """Injects failures, latency, stalls and crashes into calls to ``inner``.

    Failures are deterministic: whether a probabilistic rule fires is drawn from
    ``random.Random(seed)``, so the same seed and the same sequence of calls fail the same way.
    For ``list`` the "key" matched by ``key_contains`` is the prefix.
    """

    def __init__(self, inner: ObjectStore, seed: int = 0) -> None:
        self.inner = inner
        self.calls: list[tuple[str, str]] = []
        self._rng = seeded_random(seed)
        self._rules: list[_Rule] = []
        self._latency: dict[str, float] = {}
        self._gates: list[Gate] = []
        self._crash_after: int | None = None
        self._completed = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.inner.url

    # --- configuration -----------------------------------------------------------------------

    def fail(
        self,
        op: str,
        *,
        key_contains: str | None = None,
        times: int | None = 1,
        error: ErrorSpec = None,
        probability: float = 1.0,
    ) -> None:
        """Raise ``error`` instead of making the next ``times`` matching calls (None: every call)."""
        self._add_rule(op, key_contains, times, error, probability, after=False)

    def fail_after(
        self,
        op: str,
        *,
        key_contains: str | None = None,
        times: int | None = 1,
        error: ErrorSpec = None,
        probability: float = 1.0,
    ) -> None:
        """Make the call, then raise as if its response was lost.

        For puts the default error is :class:`PutOutcomeUnknownError` carrying the put id.
        """
        self._add_rule(op, key_contains, times, error, probability, after=True)

    def latency(self, op: str, seconds: float) -> None:
        """Sleep ``seconds`` before every call of ``op``."""
        _check_op(op)
        self._latency[op] = seconds

    def gate(self, op: str, *, key_contains: str | None = None) -> Gate:
        _check_op(op)
        gate = Gate(op, key_contains)
        with self._lock:
            self._gates.append(gate)
        return gate

    def crash_after(self, n: int) -> None:
        """After ``n`` more successful calls, every call raises :class:`SimulatedCrash`."""
        with self._lock:
            self._crash_after = self._completed + n

    def _add_rule(
        self,
        op: str,
        key_contains: str | None,
        times: int | None,
        error: ErrorSpec,
        probability: float,
        after: bool,
    ) -> None:
        _check_op(op)
        if not 0.0 <= probability <= 1.0:
            raise InvalidArgumentError(f"probability must be within [0, 1], got {probability}")
        with self._lock:
            self._rules.append(_Rule(op, key_contains, times, error, probability, after))

    # --- the store ---------------------------------------------------------------------------

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        return self._call("get", key, lambda: self.inner.get(key, byte_range))

    def head(self, key: str) -> ObjectMeta:
        return self._call("head", key, lambda: self.inner.head(key))

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        put_id = put_id or new_put_id()  # fixed here so an injected error can report it
        return self._call("put", key, lambda: self.inner.put(key, data, mode, put_id), put_id)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        # Materialised so the request (and any injected failure) happens at call time.
        metas = self._call("list", prefix, lambda: list(self.inner.list(prefix, start_after)))
        return iter(metas)

    def delete(self, key: str) -> None:
        self._call("delete", key, lambda: self.inner.delete(key))

    def _call(self, op: str, key: str, call: Callable[[], _T], put_id: str | None = None) -> _T:
        with self._lock:
            self.calls.append((op, key))
            if self._crash_after is not None and self._completed >= self._crash_after:
                raise SimulatedCrash(f"simulated crash before {op} {key}")
            before = self._pick(op, key, after=False)
            after = self._pick(op, key, after=True) if before is None else None
            gates = list(self._gates)
        if op in self._latency:
            time.sleep(self._latency[op])
        for gate in gates:
            gate.park_if_matching(op, key)
        if before is not None:
            raise self._make_error(before, op, key, put_id, applied=False)
        result = call()
        with self._lock:
            self._completed += 1
        if after is not None:
            raise self._make_error(after, op, key, put_id, applied=True)
        return result

    def _pick(self, op: str, key: str, after: bool) -> _Rule | None:
        """The first matching rule that fires this time; consumes one of its ``times``."""
        for rule in self._rules:
            if rule.after != after or not rule.matches(op, key):
                continue
            if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                continue
            if rule.remaining is not None:
                rule.remaining -= 1
            return rule
        return None

    def _make_error(self, rule: _Rule, op: str, key: str, put_id: str | None, applied: bool) -> BaseException:
        what = "applied, then its response was lost" if applied else "not applied"
        message = f"injected failure: {op} {key} ({what})"
        error = rule.error
        if isinstance(error, BaseException):
            return error
        if error is None:
            error = PutOutcomeUnknownError if op == "put" and applied else ObjectStoreError
        if issubclass(error, PutOutcomeUnknownError):
            return error(message, key, put_id or "")
        if issubclass(error, ObjectStoreError):
            return error(message, key)
        return error(message)


def _check_op(op: str) -> None:
    if op not in OPS:
        raise InvalidArgumentError(f"unknown store operation {op!r}; expected one of {', '.join(OPS)}")
