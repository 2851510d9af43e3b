"""Writer processes of the adversarial simulation: open, write, flush, close or crash, and the
acknowledgement invariant (2: no fenced writer acknowledges) checked at the moment of each
acknowledgement. Every actor that runs a writer goes through :class:`WriterSessions`."""

from __future__ import annotations

from slate_ops.engine import Db
from slate_ops.errors import EpochCollisionError, FencedError, SlateOpsError
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore.base import ObjectStore
from tests.reliability.sim.adversary.context import AdvContext
from tests.reliability.sim.adversary.model import WRITE_REFUSALS, WRITER_REFUSALS, Writer, deleted
from tests.reliability.sim.interleave import Event, Interleaver
from tests.reliability.sim.runtime import WRITER_OPTIONS, short
from tests.support.engine import simulate_crash


class WriterSessions:
    """A writer's session (open, a few writes, an ending) and its steps, checked as they return."""

    def __init__(self, ctx: AdvContext) -> None:
        self.ctx = ctx

    def open(self, writer: Writer, store: ObjectStore) -> bool:
        """Open ``writer``'s database; False when refused (a typed refusal the situation explains)."""
        try:
            db = Db.open(writer.member.path, store, WRITER_OPTIONS, clock=self.ctx.clock, background=False)
        except Exception as error:
            outcome = self.ctx.refused(f"{writer.name} opening {writer.member.path}", error, WRITER_REFUSALS)
            self.ctx.tick(writer.name, "open", outcome)
            return False
        writer.db = db
        writer.epoch = db.writer_epoch
        latest = self.ctx.latest(writer.member.path)
        if latest is not None and latest.writer_epoch > writer.epoch:
            self.ctx.figures["opens_returning_already_fenced"] += 1
        self.ctx.tick(writer.name, "open", f"ok epoch {writer.epoch}")
        return True

    def write(self, writer: Writer, *, durable: bool, delete: bool = False) -> bool:
        """One put or delete; True if it returned. An await_durable one is acknowledged when it returns."""
        assert writer.db is not None
        member = writer.member
        key = self.ctx.rng.choice(member.keys())
        value = None if delete else self.ctx.value()
        self.ctx.index += 1
        index = self.ctx.index
        member.writes.append((index, key, value, writer.name))
        writer.issued.append(index)
        try:
            if value is None:
                writer.db.delete(key, await_durable=durable)
            else:
                writer.db.put(key, value, await_durable=durable)
        except Exception as error:
            self._fenced(writer, error, "put")
            self.ctx.tick(
                writer.name,
                "delete" if delete else "put",
                self.ctx.refused(writer.name, error, WRITE_REFUSALS),
            )
            return False
        if durable:
            self._acknowledged(writer, "put(await_durable=True)")
            self.ctx.figures["durable_writes_acknowledged"] += 1
        self.ctx.tick(writer.name, "delete" if delete else "put", f"ok {key.decode()}={short(value)}")
        return True

    def finish(self, writer: Writer, how: str) -> str:
        """``flush``, ``flush_memtable``, ``close`` or ``crash``; acknowledged when it returns."""
        db = writer.db
        assert db is not None
        if how == "crash":
            simulate_crash(db)
            writer.db = None
            self.ctx.tick(writer.name, "crash", "ok")
            return "crashed"
        try:
            if how == "flush":
                db.flush()
            elif how == "flush_memtable":
                db.flush_memtable()
            else:
                db.close()
        except Exception as error:
            self._fenced(writer, error, how)
            outcome = self.ctx.refused(f"{writer.name}.{how}", error, WRITE_REFUSALS)
            if how == "close" or isinstance(error, FencedError):
                simulate_crash(db)
                writer.db = None
            self.ctx.tick(writer.name, how, outcome)
            return outcome
        if how == "close":
            writer.db = None
        self._acknowledged(writer, f"{how}()")
        self.ctx.tick(writer.name, how, "ok")
        return "ok"

    def _fenced(self, writer: Writer, error: Exception, what: str) -> None:
        """The first FencedError a writer sees must have a cause: a newer epoch holds the database, or
        it was deleted (or deleted and created again). Two processes never share an epoch here, so
        an :class:`EpochCollisionError` is a violation too: the rightful writer could not write."""
        if isinstance(error, EpochCollisionError):
            raise self.ctx.violation(
                f"{writer.name} (epoch {writer.epoch}) on {writer.member.path or '<root>'} stopped with "
                f"EpochCollisionError in {what}, but no other process holds its epoch: {error}"
            ) from error
        if not isinstance(error, FencedError) or writer.fenced_seen:
            return
        writer.fenced_seen = True
        member = writer.member
        latest = self.ctx.latest(member.path)
        self.ctx.checks["fenced_only_by_a_newer_epoch_or_deletion"] += 1
        if (
            latest is not None
            and not deleted(latest)
            and member.incarnation == writer.incarnation
            and latest.writer_epoch <= writer.epoch
        ):
            raise self.ctx.violation(
                f"{writer.name} (epoch {writer.epoch}) was refused as fenced in {what} on "
                f"{member.path or '<root>'}, but the latest manifest still holds its epoch "
                f"({latest.writer_epoch}) and nobody deleted the database: {error}"
            ) from error

    def _acknowledged(self, writer: Writer, what: str) -> None:
        """Invariant 2: the writer's epoch was not superseded (and its database not deleted or
        re-created) before this acknowledgement; then every write it issued is acknowledged."""
        member = writer.member
        latest = self.ctx.latest(member.path)
        self.ctx.checks["no_fenced_writer_acknowledges"] += 1
        if latest is None or deleted(latest):
            raise self.ctx.violation(
                f"{writer.name} (epoch {writer.epoch}) acknowledged {what} on {member.path or '<root>'}, "
                "which was deleted before the acknowledgement"
            )
        interleaving = self.ctx.interleaving
        if interleaving is None and latest.writer_epoch > writer.epoch:
            # Nothing runs concurrently: the newer epoch claimed before this operation's requests.
            raise self.ctx.violation(
                f"{writer.name} acknowledged {what} on {member.path or '<root>'} with epoch {writer.epoch}, "
                f"but writer epoch {latest.writer_epoch} had claimed the database before it returned "
                "(a fenced writer acknowledged)"
            )
        if interleaving is not None:
            self._check_interleaved_ack(writer, what, interleaving)
        if member.incarnation != writer.incarnation:
            raise self.ctx.violation(
                f"{writer.name} acknowledged {what} on {member.path or '<root>'}, which was deleted and "
                "created again since it opened (a stale writer wrote into a new database)"
            )
        for index in writer.issued[writer.acked :]:
            for i, key, _, _ in member.writes:
                if i == index:
                    member.acked[key] = max(member.acked.get(key, 0), index)
        writer.acked = len(writer.issued)

    def _check_interleaved_ack(self, writer: Writer, what: str, interleaving: Interleaver) -> None:
        """In an interleaved episode, an acknowledgement is wrong when a newer epoch's claim landed
        before one of the requests that wrote what it acknowledges (its WAL SSTs, L0 SSTs, manifest
        commits since its previous acknowledgement): the newer writer may not see it, or it lands on
        top of the newer writer's state. Requests after the last such write (a boundary read after a
        commit) do not matter: the acknowledged state was decided before the claim."""
        prefix = f"{writer.member.path}/" if writer.member.path else ""
        events = interleaving.events
        claim = self._claimed_after(events, prefix, writer)
        written = [
            e
            for e in events[writer.acked_at :]
            if e.task == writer.name
            and e.ok
            and e.op == "put"
            and e.key.startswith(prefix)
            and e.key[len(prefix) :].split("/")[0] in ("wal", "compacted", "manifest")
        ]
        writer.acked_at = len(events)
        late = [e for e in written if claim is not None and e.index > claim.index]
        if late:
            assert claim is not None
            raise self.ctx.violation(
                f"{writer.name} (epoch {writer.epoch}) acknowledged {what} on "
                f"{writer.member.path or '<root>'}, but {claim.task}'s claim of a newer epoch "
                f"({claim.key}, store call {claim.index}) landed before its write {late[0].key} (store "
                f"call {late[0].index}): a fenced writer acknowledged"
            )

    def _claimed_after(self, events: list[Event], prefix: str, writer: Writer) -> Event | None:
        """The first manifest another task committed with a writer epoch above ``writer``'s."""
        for event in events:
            relative = event.key[len(prefix) :] if event.key.startswith(prefix) else ""
            if event.task == writer.name or not event.ok or event.op != "put":
                continue
            if not relative.startswith("manifest/") or relative.count("/") != 1:
                continue
            manifest = ManifestStore(self.ctx.inner, writer.member.path)
            object_id = manifest.sequence.parse_id(event.key)
            if object_id is None:
                continue
            try:
                committed = manifest.sequence.read(object_id).value
            except SlateOpsError:
                continue
            if committed.writer_epoch > writer.epoch:
                return event
        return None

    def session(self, writer: Writer, store: ObjectStore, writes: int, ending: str) -> None:
        if not self.open(writer, store):
            return
        for _ in range(writes):
            if (
                not self.write(
                    writer, durable=self.ctx.rng.random() < 0.35, delete=self.ctx.rng.random() < 0.1
                )
                and writer.fenced_seen
            ):
                break
        if writer.db is not None:
            self.finish(writer, ending)
            if writer.db is not None and ending != "close":
                self.finish(writer, "close")
