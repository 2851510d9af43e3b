"""Tag policies: periodic tag creation and retention (docs/design/tags.md, "Tag policies",
after Paimon's "Periodically Creation & Expiration").

A :class:`TagPolicy` mirrors Paimon's table options: ``tag.create-time`` (``create_time``, 'hh:mm'
UTC), ``tag.create-interval`` (``create_interval_days``, whole days), ``tag.num-retained-max``
(``num_retained_max``) and ``tag.default-time-retained`` (``expire_after``). Periods start at
``create_time`` every ``create_interval_days`` days, counted from the unix epoch day (1970-01-01):
period ``k`` starts at ``k * create_interval_days`` days plus ``create_time``. The tag of a period is
named by formatting its start (UTC) with ``name_format``.

:func:`apply_tag_policy` creates the tag of the most recent period that has started if it is
missing, and deletes policy tags that are expired or beyond ``num_retained_max`` — in one manifest
update. Only tags whose names ``name_format`` produces for some period are the policy's; every
other tag is left alone. A tag's age counts from its period's start (not from when it was
created), so a tag created late does not live longer and an expired one is never created again.
"""

from __future__ import annotations

import functools
import math
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from slate_ops.admin.checkpoints import TAG_PREFIX, checkpoint_adder
from slate_ops.admin.tags import Tag, find_tags, validate_tag_name
from slate_ops.clock import UTC_MINUTES, render_utc
from slate_ops.config import CheckpointOptions, Duration
from slate_ops.errors import InvalidArgumentError
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import ManifestStore, VersionedManifest, require_not_destroyed
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import ZERO, RequestCounts
from slate_ops.runtime import SYSTEM_RUNTIME, FixedNow, Runtime

DAY_S = 86_400
DEFAULT_NAME_FORMAT = "auto-%Y-%m-%d"
_HH_MM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
# Name formats are checked on the periods from 2000-01-01 on and on a few around 2100-01-01 (which
# catches two-digit years).
_CHECK_FROM = (946_684_800, 4_102_444_800)
_CHECK_COUNTS = (1000, 50)


class TagPolicy(BaseModel):
    """When to create tags and how long to keep them; see the module docstring."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    create_time: str = Field(default="00:00", description="'hh:mm', UTC: when each period starts.")
    create_interval_days: int = Field(default=1, ge=1, description="Days between two periods.")
    name_format: str = Field(
        default=DEFAULT_NAME_FORMAT,
        description="strftime format of a period's start (UTC) giving its tag's name; it must name "
        "every period differently and be readable back by strptime.",
    )
    num_retained_max: int | None = Field(
        default=None, ge=1, description="Keep at most this many policy tags, the newest; None: no limit."
    )
    expire_after: Duration | None = Field(
        default=None, description="Delete policy tags whose period started this long ago; None: never."
    )

    @field_validator("create_time")
    @classmethod
    def _hh_mm(cls, value: str) -> str:
        if not _HH_MM.match(value):
            raise ValueError(f"create_time must be 'hh:mm' (UTC, 00:00 to 23:59), got {value!r}")
        return value

    @model_validator(mode="after")
    def _names_identify_periods(self) -> TagPolicy:
        problem = _check_name_format(self.name_format, self.offset_s, self.period_s)
        if problem is not None:
            raise ValueError(f"name_format {self.name_format!r}: {problem}")
        return self

    @property
    def offset_s(self) -> int:
        """Seconds from midnight (UTC) to ``create_time``."""
        hours, minutes = self.create_time.split(":")
        return int(hours) * 3600 + int(minutes) * 60

    @property
    def period_s(self) -> int:
        return self.create_interval_days * DAY_S

    def period_start(self, period: int) -> int:
        """Unix seconds at which period ``period`` starts."""
        return period * self.period_s + self.offset_s

    def due_period(self, now: float) -> int:
        """The most recent period that has started at ``now``."""
        return math.floor((now - self.offset_s) / self.period_s)

    def tag_name(self, period: int) -> str:
        return _format(self.name_format, self.period_start(period))

    def period_of(self, name: str) -> int | None:
        """The period whose tag is called ``name``, or None if the policy never produces ``name``."""
        return _period_of(self.name_format, self.offset_s, self.period_s, name)

    def is_expired(self, period: int, now: float) -> bool:
        return (
            self.expire_after is not None
            and self.period_start(period) + self.expire_after.total_seconds() <= now
        )


def checked_tag_policy(**fields: Any) -> TagPolicy:
    """``TagPolicy(**fields)``, raising :class:`InvalidArgumentError` with one line per problem."""
    try:
        return TagPolicy.model_validate(fields)
    except ValidationError as error:
        problems = "; ".join(_problem(e["loc"], e["msg"]) for e in error.errors())
        raise InvalidArgumentError(f"invalid tag policy: {problems}") from None


def _problem(loc: tuple[int | str, ...], message: str) -> str:
    message = message.removeprefix("Value error, ")
    return f"{'.'.join(map(str, loc))}: {message}" if loc else message


def _format(name_format: str, start_s: int) -> str:
    return datetime.fromtimestamp(start_s, UTC).strftime(name_format)


def _period_of(name_format: str, offset_s: int, period_s: int, name: str) -> int | None:
    try:
        parsed = datetime.strptime(name, name_format)
    except ValueError:
        return None
    at = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed
    # A format without the time of day reads back as an earlier time of the same day: the period
    # that contains it is the named one or the one before.
    first = math.floor((at.timestamp() - offset_s) / period_s)
    for period in (first, first + 1):
        if _format(name_format, period * period_s + offset_s) == name:
            return period
    return None


@functools.lru_cache(maxsize=64)
def _check_name_format(name_format: str, offset_s: int, period_s: int) -> str | None:
    """Why ``name_format`` cannot name this policy's tags, or None if it can."""
    for start, count in zip(_CHECK_FROM, _CHECK_COUNTS, strict=True):
        first = math.floor((start - offset_s) / period_s)
        for period in range(first, first + count):
            at = period * period_s + offset_s
            try:
                name = _format(name_format, at)
                validate_tag_name(name)
            except ValueError as error:
                return f"it gives an invalid tag name for the period starting {_utc(at)}: {error}"
            if _period_of(name_format, offset_s, period_s, name) != period:
                return (
                    f"the name {name!r} of the period starting {_utc(at)} does not identify that "
                    "period (two periods get the same name, or strptime cannot read it back); "
                    "include the full date, e.g. %Y-%m-%d, and the time (%H%M) for sub-day detail"
                )
    return None


def _utc(seconds: float) -> str:
    return render_utc(seconds, UTC_MINUTES)


@dataclass(frozen=True)
class TagDeletion:
    """A policy tag that :func:`apply_tag_policy` deleted (or would delete), and why."""

    tag: Tag
    period_start_s: int
    reason: Literal["expired", "num_retained_max"]


@dataclass(frozen=True)
class TagPolicyReport:
    """What :func:`apply_tag_policy` did, or would do with ``dry_run``."""

    path: str
    dry_run: bool
    now_s: int
    due_period_start_s: int  # the most recent period that has started
    due_tag: str  # its tag's name
    created: Tag | None  # the due tag, if it was missing (dry run: as a real run would create it)
    deleted: tuple[TagDeletion, ...]
    retained: tuple[str, ...]  # the policy tags kept, newest first (the created one included)
    manifest_id: int  # committed; unchanged when there was nothing to do (dry run: what a real run commits)
    requests: RequestCounts = field(default=ZERO, compare=False)
    """The object-store requests and bytes this operation made (through the admin handle; zero
    when called directly)."""


@dataclass(frozen=True)
class _Plan:
    create: str | None
    deleted: tuple[tuple[Tag, int, Literal["expired", "num_retained_max"]], ...]
    retained: tuple[str, ...]

    @property
    def changes(self) -> bool:
        return self.create is not None or bool(self.deleted)


def _plan(manifest: Manifest, policy: TagPolicy, now: float) -> _Plan:
    """What the policy changes in ``manifest`` at ``now``."""
    due = policy.due_period(now)
    tags = find_tags(manifest)
    managed = [(period, t) for t in tags if (period := policy.period_of(t.name)) is not None]
    create: str | None = policy.tag_name(due)
    if create in {t.name for t in tags} or policy.is_expired(due, now):
        create = None
    deleted: list[tuple[Tag, int, Literal["expired", "num_retained_max"]]] = []
    kept: list[tuple[int, str, Tag | None]] = [] if create is None else [(due, create, None)]
    for period, managed_tag in managed:
        if policy.is_expired(period, now):
            deleted.append((managed_tag, period, "expired"))
        else:
            kept.append((period, managed_tag.name, managed_tag))
    kept.sort(key=lambda item: item[0], reverse=True)
    if policy.num_retained_max is not None:
        for period, _, tag in kept[policy.num_retained_max :]:
            if tag is None:  # newer policy tags exist already: the due one would go at once
                create = None
            else:
                deleted.append((tag, period, "num_retained_max"))
        kept = kept[: policy.num_retained_max]
    return _Plan(create, tuple(deleted), tuple(name for _, name, _ in kept))


def plan_tag_policy(manifest: Manifest, policy: TagPolicy, now: float) -> _Plan:
    """What ``policy`` changes in ``manifest``'s tags at ``now`` (pure; the SlateDB handle applies
    the same plan to a SlateDB database's tags)."""
    return _plan(manifest, policy, now)


def policy_report(
    path: str,
    policy: TagPolicy,
    now: float,
    plan: _Plan,
    *,
    dry_run: bool,
    created: Tag | None,
    manifest_id: int,
) -> TagPolicyReport:
    """The report of ``plan`` made at ``now`` (both engines)."""
    due = policy.due_period(now)
    return TagPolicyReport(
        path=path,
        dry_run=dry_run,
        now_s=int(now),
        due_period_start_s=policy.period_start(due),
        due_tag=policy.tag_name(due),
        created=created,
        deleted=tuple(TagDeletion(t, policy.period_start(p), r) for t, p, r in plan.deleted),
        retained=plan.retained,
        manifest_id=manifest_id,
    )


def apply_tag_policy(
    path: str,
    store: ObjectStore,
    policy: TagPolicy,
    *,
    dry_run: bool = True,
    clock: Runtime = SYSTEM_RUNTIME,
    new_id: Callable[[], uuid.UUID] | None = None,
) -> TagPolicyReport:
    """Create the due tag if missing and delete expired or excess policy tags, in one commit.

    Dry run by default; a dry run reports exactly what a real run at the same time would do
    (``new_id``, else ``clock.new_uuid``, names the created tag's checkpoint). Applying twice at the
    same time changes nothing the second time. A destroyed database raises
    :class:`~slate_ops.errors.DbDestroyedError`.
    """
    now = clock.now()
    fixed = FixedNow(clock, now)  # one time for the whole run, whatever the retries
    manifests = ManifestStore(store, path)
    due = policy.due_period(now)
    checkpoint_id = (new_id or clock.new_uuid)()
    options = CheckpointOptions(name=TAG_PREFIX + policy.tag_name(due), lifetime=None)

    def report(dry: bool, manifest_id: int, plan: _Plan, created: Tag | None) -> TagPolicyReport:
        return policy_report(
            manifests.path, policy, now, plan, dry_run=dry, created=created, manifest_id=manifest_id
        )

    current = manifests.read_latest_required()
    require_not_destroyed(current.value, manifests.location)
    if dry_run:
        plan = _plan(current.value, policy, now)
        if not plan.changes:
            return report(True, current.id, plan, None)
        created = None
        if plan.create is not None:
            created = Tag(plan.create, checkpoint_id, current.id + 1, int(now))
        return report(True, current.id + 1, plan, created)

    adders: list[Callable[[VersionedManifest], Manifest]] = []
    plans: list[_Plan] = []

    def apply(latest: VersionedManifest) -> Manifest | None:
        require_not_destroyed(latest.value, manifests.location)
        plan = _plan(latest.value, policy, now)
        plans[:] = [plan]
        if not plan.changes:
            return None
        manifest = latest.value
        if plan.create is not None:
            if not adders:  # lists the WAL once, so the tag also covers WAL-only writes
                adders.append(checkpoint_adder(manifests, options, checkpoint_id, fixed))
            manifest = adders[0](latest)
        gone = {t.checkpoint_id for t, _, _ in plan.deleted}
        return manifest.with_changes(checkpoints=tuple(c for c in manifest.checkpoints if c.id not in gone))

    committed = manifests.update(apply)
    plan = plans[0]
    created = None
    if plan.create is not None:
        checkpoint = committed.value.checkpoint(checkpoint_id)
        assert checkpoint is not None
        created = Tag(plan.create, checkpoint_id, checkpoint.manifest_id, checkpoint.create_time_s)
    return report(False, committed.id, plan, created)


__all__ = [
    "DEFAULT_NAME_FORMAT",
    "TagDeletion",
    "TagPolicy",
    "TagPolicyReport",
    "apply_tag_policy",
    "checked_tag_policy",
    "plan_tag_policy",
    "policy_report",
]
