"""The adversarial simulation's invariants checked after every episode: references (1), deleted
databases stay deleted (3), acknowledged writes readable and tags reading what they pinned (4),
objects of no database kept (5)."""

from __future__ import annotations

import uuid

from slate_ops.admin.reachability import check_references
from slate_ops.engine import DbReader
from slate_ops.errors import DbNotFoundError, SlateOpsError
from slate_ops.manifest.store import ManifestStore
from tests.reliability.sim.adversary.context import AdvContext
from tests.reliability.sim.adversary.model import GONE_ERRORS, KEYS, STRAYS, Member, deleted
from tests.reliability.sim.runtime import READER_OPTIONS, diff, short


class AdvInvariants:
    """Reads every database of the family and compares it with the model."""

    def __init__(self, ctx: AdvContext) -> None:
        self.ctx = ctx

    def _read(self, member: Member, checkpoint_id: uuid.UUID | None) -> dict[bytes, bytes]:
        """Everything ``member`` holds (at ``checkpoint_id``, or its latest state), by a fresh reader."""
        reader = DbReader.open(
            member.path, self.ctx.inner, checkpoint_id, READER_OPTIONS, clock=self.ctx.clock, background=False
        )
        try:
            return dict(reader.scan())
        finally:
            reader.close()

    def check_member(self, member: Member) -> dict[bytes, bytes]:
        """Invariant 4 on one live database; the model then settles on what was read."""
        try:
            observed = self._read(member, None)
        except Exception as error:
            raise self.ctx.violation(
                f"{member.path or '<root>'} ({member.kind}) cannot be read: {type(error).__name__}: {error}"
            ) from error
        self.ctx.checks["acknowledged_writes_readable"] += 1
        wrong = {
            k: observed.get(k)
            for k in set(KEYS) | observed.keys()
            if observed.get(k) not in member.allowed(k)
        }
        if wrong:
            shown = ", ".join(
                f"{k!r}: {short(v)} (allowed {sorted(short(a) for a in member.allowed(k))})"
                for k, v in sorted(wrong.items())[:5]
            )
            raise self.ctx.violation(
                f"{member.path or '<root>'} ({member.kind}) does not hold its acknowledged writes: {shown}"
            )
        member.reset(observed)
        return observed

    def check_all(self) -> None:
        self.ctx.running = f"checks after episode {self.ctx.episode}"
        for member in list(self.ctx.members.values()):
            if member.state == "soft" and self.ctx.gone(member.path):
                self.ctx.deleted_now(member)
            if member.state == "live":
                self.check_member(member)
                for name, content in member.tags.items():
                    self._check_tag(member, name, content)
            elif member.state == "deleted":
                self._check_deleted(member)
        paths = [m.path for m in self.ctx.present()]
        problems = check_references(self.ctx.inner, paths, now=self.ctx.clock.now())
        self.ctx.checks["references_reachable"] += 1
        if problems:
            shown = "\n    ".join(str(p) for p in problems[:6])
            raise self.ctx.violation(f"check_references over {len(paths)} database(s) found:\n    {shown}")
        self.ctx.checks["objects_of_no_database_kept"] += 1
        for key, data in STRAYS.items():
            try:
                found = self.ctx.inner.get(key).data
            except Exception as error:
                raise self.ctx.violation(
                    f"{key}, which belongs to no database, was deleted ({error})"
                ) from error
            if found != data:
                raise self.ctx.violation(f"{key}, which belongs to no database, was changed")

    def _check_tag(self, member: Member, name: str, content: dict[bytes, bytes]) -> None:
        latest = self.ctx.latest(member.path)
        tag = (
            None if latest is None else next((c for c in latest.checkpoints if c.name == f"tag:{name}"), None)
        )
        self.ctx.checks["tags_read_what_they_pinned"] += 1
        if tag is None:
            raise self.ctx.violation(
                f"the tag {name} of {member.path or '<root>'} is gone (nobody deleted it)"
            )
        try:
            observed = self._read(member, tag.id)
        except Exception as error:
            raise self.ctx.violation(
                f"the tag {name} of {member.path or '<root>'} cannot be read: {error}"
            ) from error
        if observed != content:
            raise self.ctx.violation(
                f"the tag {name} of {member.path or '<root>'} reads differently: {diff(observed, content)}"
            )

    def _check_deleted(self, member: Member) -> None:
        """Invariant 3: only tombstones, and a reader refuses the path with a typed error."""
        manifests = ManifestStore(self.ctx.inner, member.path)
        self.ctx.checks["deleted_database_stays_deleted"] += 1
        for listed in manifests.sequence.list():
            try:
                manifest = manifests.read(listed.id).value
            except Exception as error:
                raise self.ctx.violation(
                    f"{member.path or '<root>'} was deleted, but manifest {listed.id} is there and "
                    f"unreadable: {type(error).__name__}: {error}"
                ) from error
            if not deleted(manifest):
                raise self.ctx.violation(
                    f"{member.path or '<root>'} was deleted, but manifest {listed.id} is not a tombstone "
                    "(a stale process brought the database back)"
                )
        try:
            reader = DbReader.open(
                member.path, self.ctx.inner, None, READER_OPTIONS, clock=self.ctx.clock, background=False
            )
        except SlateOpsError as error:
            if isinstance(error, DbNotFoundError) or type(error).__name__ in GONE_ERRORS:
                return
            raise self.ctx.violation(
                f"a reader of the deleted {member.path or '<root>'} fails with {type(error).__name__}: "
                f"{error}"
            ) from error
        reader.close()
        raise self.ctx.violation(f"a reader opened the deleted database {member.path or '<root>'}")
