"""The simulation's deterministic runtime: configuration, trace and result types, the seeded runtime
(ids and time), the stores every actor talks to, the writer and reader without their threads, and the
model of a database's write history (tests/reliability/simulation.py)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from dataclasses import replace as _replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar
from unittest import mock

from slate_ops.compaction import CompactorOptions
from slate_ops.engine import Db, DbOptions, ReaderOptions, WriteBatch
from slate_ops.errors import GcFailedError
from slate_ops.manifest import store as manifest_store
from slate_ops.manifest.codec import decode_manifest
from slate_ops.manifest.model import Manifest
from slate_ops.objstore import FaultInjectingStore
from slate_ops.objstore.base import GetResult, ObjectMeta, ObjectStore, PutMode, PutResult
from slate_ops.objstore.wrappers import SimulatedCrash
from slate_ops.runtime import ManualRuntime
from tests.reliability.sim.wal_puts import SimRuntime

MAIN = "main"
ACTORS = ("writer", "reader", "compactor", "gc", "admin", "lifecycle")
ACTOR_WEIGHTS = (45, 22, 10, 9, 14, 12)
_R = TypeVar("_R")
INJECTED = "injected failure:"  # how FaultInjectingStore's errors begin
_OVERWRITE = PutMode.overwrite()
START_TIME = 1_700_000_000.0

REPLAY = (
    "SLATE_OPS_SIM_SEED={seed} SLATE_OPS_SIM_STEPS={steps}{store} "
    "pytest tests/reliability/test_simulation.py -k replay -s"
)

# --- configuration ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimConfig:
    """One simulation run. The rates are per store request (errors, stalls) or per step (crashes)."""

    seed: int
    steps: int = 200
    store: Literal["memory", "local"] = "memory"
    root: Path | None = None  # the local store's directory
    keys: int = 24
    error_rate: float = 0.02  # a request fails before it is applied
    lost_response_rate: float = 0.01  # a put is applied, then its response is lost
    stall_rate: float = 0.01  # a request hangs: the clock moves on, another actor runs meanwhile
    max_stall_s: float = 30.0
    crash_rate: float = 0.03  # an actor step crashes part-way (writer, compactor, gc, admin, lifecycle)
    latency_s: float = 0.0  # real sleep before every request (0 in CI)
    check_every: int = 10  # the full invariant sweep (fresh reader, verify_db, pinned content)
    min_age_s: float = 120.0  # GC's min_age for every namespace (the safe floor)
    trace_tail: int = 40  # trace entries printed with a violation
    durable_write_rate: float = 0.15  # writes issued with await_durable=True
    family_size: int = 8  # the lifecycle actor keeps at most this many live databases besides main

    def replay_command(self) -> str:
        store = "" if self.store == "memory" else f" SLATE_OPS_SIM_STORE={self.store}"
        return REPLAY.format(seed=self.seed, steps=self.steps, store=store)


# The writer's and reader's timers are steps of the simulation (both open with background=False); the
# limits that would make a call wait on a background thread are out of reach.
WRITER_OPTIONS = DbOptions(
    wal_flush_interval=timedelta(hours=1),
    manifest_poll_interval=timedelta(hours=1),
    l0_sst_size_bytes=1500,  # memtables freeze on their own now and then: more L0 SSTs
    l0_max_ssts=1_000_000,
    max_unflushed_bytes=1 << 40,
    wal_buffer_bytes=1 << 30,
)
READER_OPTIONS = ReaderOptions(
    manifest_poll_interval=timedelta(seconds=10),  # polled by the scheduler in simulated time
    checkpoint_lifetime=timedelta(minutes=10),
    max_memtable_bytes=2000,
)
COMPACTOR_OPTIONS = CompactorOptions(
    min_sources=3, max_sources=6, target_sst_bytes=4096, max_subcompaction_bytes=6000
)


class InvariantViolation(AssertionError):
    """An invariant failed; the message names the seed, the step, the replay command and the trace tail."""

    def __init__(self, message: str, trace: list[TraceEntry]) -> None:
        super().__init__(message)
        self.trace = trace


@dataclass(frozen=True)
class TraceEntry:
    step: int
    actor: str
    action: str
    outcome: str

    def __str__(self) -> str:
        return f"{self.step:>6}  {self.actor:<9} {self.action:<34} {self.outcome}"


@dataclass
class SimResult:
    """What one run did: its trace and the figures for docs/reliability.md."""

    config: SimConfig
    trace: list[TraceEntry]
    digest: str  # sha256 of the trace and of every object left in the store (names and contents)
    actions: Counter[str]  # "actor.action outcome-kind"
    faults: Counter[str]  # injected faults by kind
    checks: Counter[str]  # invariant checks performed, by invariant
    figures: dict[str, float]
    duration_s: float

    def summary(self) -> str:
        c = self.config
        lines = [
            f"seed {c.seed}: {c.steps} steps on the {c.store} store in {self.duration_s:.1f}s, "
            f"{len(self.trace)} trace entries, digest {self.digest[:16]}",
            "  faults: " + _counts(self.faults),
            "  checks: " + _counts(self.checks),
            "  figures: " + ", ".join(f"{k}={v:g}" for k, v in sorted(self.figures.items())),
        ]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The figures of the run as plain JSON (tests/reliability/results/simulation.json)."""
        c = self.config
        return {
            "seed": c.seed,
            "steps": c.steps,
            "store": c.store,
            "duration_s": round(self.duration_s, 2),
            "trace_entries": len(self.trace),
            "digest": self.digest,
            "checks": dict(sorted(self.checks.items())),
            "operations": dict(sorted(self.actions.items())),
            "faults": dict(sorted(self.faults.items())),
            "figures": {k: v for k, v in sorted(self.figures.items())},
        }


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(counter.items())) or "none"


def derive(seed: int, *parts: str) -> int:
    """A seed for one purpose, stable across processes (no ``hash()``)."""
    digest = hashlib.sha256("/".join((str(seed), *parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


# --- the runtime -----------------------------------------------------------------------------------


def sim_runtime(seed: int) -> ManualRuntime:
    """The one runtime of a run, passed as ``clock=`` to every component: time moves when the
    scheduler says so; UUIDs (checkpoint ids), ULIDs (SST, view and compaction ids) and the
    compactor's output ids come from ``seed``, and so does the order in which a writer's WAL PUTs in
    flight land (tests/reliability/sim/wal_puts.py). Two runs of one seed hand out the same ids."""
    return SimRuntime(START_TIME, seed=derive(seed, "ids"), wal_put_seed=derive(seed, "wal-puts"))


@contextlib.contextmanager
def memoized_manifest_decoding(limit: int = 50_000) -> Iterator[None]:
    """For speed only, not determinism: decoded manifests are memoized by their bytes (decoding is a
    pure function of them and returns a frozen value; every actor and every check reads the same few
    manifests over and over, and the FlatBuffers decoding of a manifest with many checkpoints
    dominated the run time)."""
    decode = decode_manifest
    decoded: dict[bytes, Manifest] = {}

    def memoized(data: bytes, path: str) -> Manifest:
        key = bytes(data)
        found = decoded.get(key)
        if found is None:
            found = decode(key, path)  # a corrupt manifest raises every time
            if len(decoded) >= limit:
                decoded.pop(next(iter(decoded)))
            decoded[key] = found
        return found

    with mock.patch.object(manifest_store, "decode_manifest", memoized):
        yield


class SimTimeStore:
    """Reports ``last_modified`` in simulated time for a store that stamps real time (the local store)."""

    def __init__(self, inner: ObjectStore, clock: ManualRuntime) -> None:
        self.inner = inner
        self._clock = clock
        self._written: dict[str, float] = {}

    @property
    def url(self) -> str:
        return self.inner.url

    def _meta(self, meta: ObjectMeta) -> ObjectMeta:
        at = self._written.get(meta.key)
        if at is None:
            return meta
        return ObjectMeta(meta.key, meta.size, datetime.fromtimestamp(at, UTC), meta.etag, meta.put_id)

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        result = self.inner.get(key, byte_range)
        return GetResult(result.data, self._meta(result.meta))

    def head(self, key: str) -> ObjectMeta:
        return self._meta(self.inner.head(key))

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        result = self.inner.put(key, data, mode, put_id)
        self._written[key] = self._clock.now()
        return result

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        return iter([self._meta(m) for m in self.inner.list(prefix, start_after)])

    def delete(self, key: str) -> None:
        self.inner.delete(key)
        self._written.pop(key, None)


class RequestHook(Protocol):
    """What a :class:`SimStore` reports to: the simulation."""

    faults: Counter[str]

    def before_request(self, actor: str, op: str) -> None: ...


class SimStore:
    """What an actor talks to: counts the faults its fault-injecting store raises, and gives the
    simulation a hook before every request (stalls and interleaved steps)."""

    def __init__(self, sim: RequestHook, actor: str, faulty: FaultInjectingStore) -> None:
        self.sim = sim
        self.actor = actor
        self.faulty = faulty

    @property
    def url(self) -> str:
        return self.faulty.url

    def _call(self, op: str, key: str, call: Callable[[], _R]) -> _R:
        self.sim.before_request(self.actor, op)
        try:
            return call()
        except SimulatedCrash:
            self.sim.faults[f"crash:{self.actor}"] += 1
            raise
        except Exception as error:
            if INJECTED in str(error):
                kind = "lost-response" if "applied, then" in str(error) else "error"
                self.sim.faults[f"{kind}:{op}"] += 1
            raise

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        return self._call("get", key, lambda: self.faulty.get(key, byte_range))

    def head(self, key: str) -> ObjectMeta:
        return self._call("head", key, lambda: self.faulty.head(key))

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        return self._call("put", key, lambda: self.faulty.put(key, data, mode, put_id))

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        return self._call("list", prefix, lambda: self.faulty.list(prefix, start_after))

    def delete(self, key: str) -> None:
        self._call("delete", key, lambda: self.faulty.delete(key))


# --- the model of the writer's history ------------------------------------------------------------

Op = tuple[bytes, bytes | None]  # (key, value); None deletes


class Model:
    """Every write the simulation issued, in order: write ``i`` (1-based) is ``log[i - 1]``.

    The database must always hold the state after some prefix of the log: at least ``durable``
    writes (acknowledged by a flush, a checkpoint, a clean close or a write with ``await_durable``),
    at most all of them. ``base`` is the state before the first write (a clone's, a shard's, a
    merged database's content when it was created). ``durable_writes`` is the prefix acknowledged by
    the last ``await_durable`` write: no crash may lose it.
    """

    SNAPSHOT_EVERY = 64

    def __init__(self, base: dict[bytes, bytes] | None = None) -> None:
        self.log: list[tuple[Op, ...]] = []
        self.durable = 0
        self.durable_writes = 0
        self.current: dict[bytes, bytes] = dict(base or {})
        self._snapshots: dict[int, dict[bytes, bytes]] = {0: dict(self.current)}

    @property
    def issued(self) -> int:
        return len(self.log)

    def issue(self, ops: tuple[Op, ...]) -> None:
        self.log.append(ops)
        apply_ops(self.current, ops)
        if self.issued % self.SNAPSHOT_EVERY == 0:
            self._snapshots[self.issued] = dict(self.current)

    def retract(self) -> None:
        """The last write issued was never applied."""
        self._snapshots.pop(self.issued, None)
        self.log.pop()
        self.current = self.state(self.issued)

    def acknowledge(self, *, await_durable: bool = False) -> None:
        self.durable = self.issued
        if await_durable:
            self.durable_writes = self.issued

    def state(self, prefix: int) -> dict[bytes, bytes]:
        base = max(p for p in self._snapshots if p <= prefix)
        state = dict(self._snapshots[base])
        for ops in self.log[base:prefix]:
            apply_ops(state, ops)
        return state

    def states(self, lo: int, hi: int) -> Iterator[tuple[int, dict[bytes, bytes]]]:
        """``(p, state after p writes)`` for p in ``[lo, hi]``; the dict is reused between items."""
        state = self.state(lo)
        yield lo, state
        for p in range(lo + 1, hi + 1):
            apply_ops(state, self.log[p - 1])
            yield p, state

    def first_match(self, observed: dict[bytes, bytes], lo: int, hi: int) -> int | None:
        return next((p for p, state in self.states(lo, hi) if state == observed), None)

    def last_match(self, observed: dict[bytes, bytes], lo: int, hi: int) -> int | None:
        found = None
        for p, state in self.states(lo, hi):
            if state == observed:
                found = p
        return found

    def first_key_match(self, key: bytes, value: bytes | None, lo: int, hi: int) -> int | None:
        current = self.state(lo).get(key)
        if current == value:
            return lo
        for p in range(lo + 1, hi + 1):
            for k, v in self.log[p - 1]:
                if k == key:
                    current = v
            if current == value:
                return p
        return None

    def truncate(self, prefix: int) -> None:
        """The writer recovered the first ``prefix`` writes; the rest are lost (never acknowledged)."""
        assert prefix >= self.durable_writes, "the caller checks that durable writes survived"
        del self.log[prefix:]
        self._snapshots = {p: s for p, s in self._snapshots.items() if p <= prefix}
        self.current = self.state(prefix)
        self.durable = prefix


def write_ops(db: Db, model: Model, ops: tuple[Op, ...], await_durable: bool) -> None:
    """One write (a put or delete, or a batch of several) issued to ``model``; acknowledged with
    every write before it when it returns from ``await_durable``. A write that fails after it was
    applied (its durability round failed) is issued but not acknowledged.

    It is issued before the call: once applied, its durability round makes store requests, and a
    stall there lets other actors read the database, which may already hold it."""
    before = db.last_seq
    model.issue(ops)
    try:
        if len(ops) == 1:
            key, value = ops[0]
            if value is None:
                db.delete(key, await_durable=await_durable)
            else:
                db.put(key, value, await_durable=await_durable)
        else:
            batch = WriteBatch()
            for key, value in ops:
                if value is None:
                    batch.delete(key)
                else:
                    batch.put(key, value)
            db.write(batch, await_durable=await_durable)
    except BaseException:
        if db.last_seq == before:
            model.retract()  # refused before it was applied
        raise
    if await_durable:
        model.acknowledge(await_durable=True)


def apply_ops(state: dict[bytes, bytes], ops: tuple[Op, ...]) -> None:
    for key, value in ops:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value


def diff(observed: dict[bytes, bytes], expected: dict[bytes, bytes], limit: int = 6) -> str:
    keys = sorted(k for k in observed.keys() | expected.keys() if observed.get(k) != expected.get(k))
    shown = ", ".join(f"{k!r}: {short(observed.get(k))} vs {short(expected.get(k))}" for k in keys[:limit])
    return f"{len(keys)} key(s) differ ({shown}{', ...' if len(keys) > limit else ''})"


def short(value: bytes | None) -> str:
    return "absent" if value is None else repr(value[:8])


def without_faults(config: SimConfig) -> SimConfig:
    return _replace(config, error_rate=0.0, lost_response_rate=0.0, stall_rate=0.0, crash_rate=0.0)


def seconds(value: timedelta) -> float:
    return value.total_seconds()


def is_injected(error: BaseException) -> bool:
    """Whether ``error`` is (or was caused by) an injected fault; for a failed GC run, every error."""
    if isinstance(error, GcFailedError):
        report = error.report
        errors: tuple[str, ...] = getattr(report, "errors", ())
        return bool(errors) and all(INJECTED in e or "SimulatedCrash" in e for e in errors)
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, SimulatedCrash) or INJECTED in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def digest_in_another_process(statement: str, hash_seed: int) -> str:
    """What ``statement`` (Python that prints a run's digest) prints in a fresh interpreter with
    another hash seed: replays must not depend on the process."""
    root = Path(__file__).resolve().parents[3]
    script = f"import logging; logging.disable(logging.CRITICAL)\n{statement}\n"
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed), "PYTHONPATH": str(root)}
    there = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    assert there.returncode == 0, there.stderr[-3000:]
    return there.stdout.strip()
