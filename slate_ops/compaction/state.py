"""The compactor's persisted state: ``<db>/compactions/<id>.compactions`` (SlateDB's GC boundary-file design
(docs/design/gc.md) namespace).

Written with the sequenced-commit primitive and protected by ``gc/compactions.boundary``. It holds
the compactor epoch (fencing, like the manifest's) and the recent compactions with their status and
outputs, so a restarted compactor knows which compactions never committed (their outputs are
orphans that GC may delete) and an operator can see what ran.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

from slate_ops.errors import CorruptObjectError, FencedError, UnsupportedFormatVersionError
from slate_ops.layout import COMPACTIONS_DIR, COMPACTIONS_SUFFIX
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.txn import EpochField, FenceableStore, SequencedStore, Versioned

FORMAT_VERSION = 1
KEEP_FINISHED = 32


@dataclass(frozen=True)
class CompactionRecord:
    id: str
    epoch: int
    kind: str
    status: str  # "running" | "completed" | "failed"
    sources: tuple[str, ...]
    outputs: tuple[str, ...] = ()
    started_at_s: float = 0.0
    finished_at_s: float | None = None
    manifest_id: int | None = None


@dataclass(frozen=True)
class CompactionsState:
    compactor_epoch: int = 0
    compactions: tuple[CompactionRecord, ...] = ()


class CompactionsCodec:
    def encode(self, value: CompactionsState) -> bytes:
        return json.dumps({"version": FORMAT_VERSION, **asdict(value)}, sort_keys=True).encode()

    def decode(self, data: bytes, path: str) -> CompactionsState:
        try:
            raw = json.loads(data)
            version = raw.get("version")
            if type(version) is int and version > FORMAT_VERSION:  # intact, written by a newer slate_ops
                raise UnsupportedFormatVersionError(path, version, (FORMAT_VERSION,))
            if version != FORMAT_VERSION:
                raise CorruptObjectError(path, f"unknown compactions format version {version!r}")
            records = tuple(
                CompactionRecord(**{**r, "sources": tuple(r["sources"]), "outputs": tuple(r["outputs"])})
                for r in raw["compactions"]
            )
            return CompactionsState(int(raw["compactor_epoch"]), records)
        except CorruptObjectError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise CorruptObjectError(path, f"not a compactions file: {error}") from error


EPOCH: EpochField[CompactionsState] = EpochField(
    "compactor", lambda s: s.compactor_epoch, lambda s, e: replace(s, compactor_epoch=e)
)


class CompactionsStore:
    """The ``.compactions`` namespace of one database, fenced at the compactor's epoch."""

    def __init__(self, store: ObjectStore, db_path: str, *, clock: Runtime = SYSTEM_RUNTIME) -> None:
        self.sequence: SequencedStore[CompactionsState] = SequencedStore(
            store, db_path, COMPACTIONS_DIR, COMPACTIONS_SUFFIX, CompactionsCodec(), clock=clock
        )
        self._fenced: FenceableStore[CompactionsState] | None = None

    def claim(self, epoch: int, now: float) -> FenceableStore[CompactionsState]:
        """Take the namespace at ``epoch`` (the manifest's new compactor epoch); running compactions
        of older epochs are marked failed — they never committed."""

        def take(current: Versioned[CompactionsState] | None) -> CompactionsState:
            state = current.value if current is not None else CompactionsState()
            if state.compactor_epoch >= epoch:
                raise FencedError(self.sequence.directory, "compactor", epoch, state.compactor_epoch)
            records = tuple(
                replace(r, status="failed", finished_at_s=now) if r.status == "running" else r
                for r in state.compactions
            )
            return CompactionsState(epoch, records)

        self.sequence.update(take)
        self._fenced = FenceableStore(self.sequence, EPOCH, epoch)
        return self._fenced

    def record(self, record: CompactionRecord) -> None:
        """Insert or replace ``record`` (by id), keeping the newest finished ones."""
        assert self._fenced is not None, "claim() first"

        def put(current: Versioned[CompactionsState]) -> CompactionsState:
            others = [r for r in current.value.compactions if r.id != record.id]
            running = [r for r in others if r.status == "running"]
            finished = [r for r in others if r.status != "running"][-(KEEP_FINISHED - 1) :]
            return replace(current.value, compactions=(*finished, *running, record))

        self._fenced.update(put)

    def read(self) -> CompactionsState:
        latest = self.sequence.read_latest()
        return CompactionsState() if latest is None else latest.value
