"""The tailing reader actor: gets, scans (some held open across steps), polls, restarts and crashes;
its reads never go backwards in the writer's history."""

from __future__ import annotations

import uuid

from slate_ops.engine import DbReader
from slate_ops.errors import ObjectNotFoundError
from slate_ops.manifest.store import ManifestStore
from tests.reliability.sim.actors.scans import finish_scan, open_scan
from tests.reliability.sim.context import SimContext
from tests.reliability.sim.runtime import MAIN, READER_OPTIONS, SimStore, diff, is_injected, seconds, short


class ReaderActor:
    """The tailing reader of main (``ctx.reader``)."""

    def __init__(self, ctx: SimContext) -> None:
        self.ctx = ctx
        self.store: SimStore | None = None
        self.last_poll = 0.0
        self.finished_checkpoint = uuid.UUID(int=0)  # the checkpoint of the last scan finished

    def poll_due(self) -> bool:
        """The reader's poll interval has passed (its poll thread would run now)."""
        return self.ctx.reader is not None and self.ctx.clock.now() - self.last_poll >= seconds(
            READER_OPTIONS.manifest_poll_interval
        )

    def step(self, forced: str | None) -> tuple[str, str]:
        ctx = self.ctx
        if ctx.reader is None:
            store = ctx.store_for("reader")
            try:
                ctx.reader = DbReader.open(
                    MAIN, store, options=READER_OPTIONS, clock=ctx.clock, background=False
                )
            except Exception as error:
                return "open", ctx.outcome(error)
            self.store = store
            self.last_poll = ctx.clock.now()
            return "open", "ok"
        reader = ctx.reader
        open_scan_now = ctx.reader_scan is not None
        action = (
            forced
            or ctx.rng.choices(
                ("get", "scan", "scan_open", "scan_finish", "poll", "reopen", "crash"),
                weights=(40, 15, 0 if open_scan_now else 6, 10 if open_scan_now else 0, 15, 3, 2),
            )[0]
        )
        ctx.doing(action)
        if action in ("reopen", "crash"):
            ctx.reader_scan = None
        try:
            if action == "scan_open":
                ctx.reader_scan = open_scan(ctx, reader.scan(), ctx.reader_floor, reader.checkpoint_id)
                return action, f"ok pins its checkpoint, {len(ctx.reader_scan.seen)} keys read"
            if action == "scan_finish":
                assert ctx.reader_scan is not None
                scan, ctx.reader_scan = ctx.reader_scan, None
                self.finished_checkpoint = scan.checkpoint_id
                return action, finish_scan(ctx, scan, "reader")
            if action == "get":
                key = ctx.key()
                value = reader.get(key)
                self._observe_get(key, value)
                return action, f"ok {key.decode()}={short(value)}"
            if action == "scan":
                self._observe_scan(reader, "scan")
                return action, "ok"
            if action == "poll":
                reader.poll()
                self.last_poll = ctx.clock.now()
                return action, "ok"
            if action == "reopen":
                ctx.reader = None
                reader.close()
                return action, "ok"
            if action == "crash":
                ctx.reader = None  # dropped without closing: its checkpoint expires
                ctx.figures["reader_crashes"] += 1
                return action, "ok; reader process died"
        except ObjectNotFoundError as error:
            checkpoint = reader.checkpoint_id if action != "scan_finish" else self.finished_checkpoint
            if not is_injected(error) and self._checkpoint_live(checkpoint):
                raise ctx.violation(
                    f"the reader ({action}) lost an object while the checkpoint it reads, {checkpoint}, "
                    f"was live: {error}"
                ) from error
            return action, "failed: its checkpoint expired"
        except Exception as error:
            if action == "reopen":
                ctx.reader = None
            return action, ctx.outcome(error)
        raise AssertionError(action)

    def drop(self) -> None:
        """The process dies (its checkpoint expires)."""
        self.ctx.reader = self.store = self.ctx.reader_scan = None

    def _observe_get(self, key: bytes, value: bytes | None) -> None:
        ctx = self.ctx
        ctx.checks["reader_monotonic"] += 1
        prefix = ctx.model.first_key_match(key, value, ctx.reader_floor, ctx.model.issued)
        if prefix is None:
            raise ctx.violation(
                f"the reader read {short(value)} for {key!r}, which is no value of that key at or after "
                f"prefix {ctx.reader_floor} it had already seen (a stale, lost or unknown value)"
            )
        ctx.reader_floor = prefix

    def _observe_scan(self, reader: DbReader, what: str) -> None:
        ctx = self.ctx
        observed = dict(reader.scan())
        ctx.checks["reader_monotonic"] += 1
        prefix = ctx.model.first_match(observed, ctx.reader_floor, ctx.model.issued)
        if prefix is None:
            raise ctx.violation(
                f"the reader's {what} is the history at no prefix in [{ctx.reader_floor}, "
                f"{ctx.model.issued}]; vs the newest state: {diff(observed, ctx.model.current)}"
            )
        ctx.reader_floor = prefix

    def _checkpoint_live(self, checkpoint_id: uuid.UUID) -> bool:
        latest = ManifestStore(self.ctx.inner, MAIN).read_latest_required().value
        checkpoint = latest.checkpoint(checkpoint_id)
        return checkpoint is not None and not checkpoint.is_expired(self.ctx.clock.now())
