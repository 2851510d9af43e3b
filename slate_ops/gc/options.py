"""Options of the garbage collector (docs/design/gc.md, "Options"; defaults from SlateDB's garbage
collector).

Every ``*_min_age`` defaults to SlateDB's 300 s and may not be set below :data:`MIN_AGE_FLOOR`
(120 s) unless ``allow_unsafe_min_age=True``.

.. warning::
   ``allow_unsafe_min_age`` exists for tests only. ``min_age`` is what protects an object that a
   writer or compactor has written but not yet committed to a manifest, and what keeps the
   sequenced stores' 60 s "latest version" cache honest (docs/design/coordination.md). Below the
   floor, a slow writer can lose an L0 SST or a reader can see a stale manifest. Never enable it on
   a database that matters.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from slate_ops.config import Duration, format_duration

Resource = Literal["database", "checkpoints", "manifest", "compactions", "wal", "compacted", "clones"]
"""One GC task: the destroyed database, expired checkpoints, the four object namespaces, clone detaching."""

ALL_RESOURCES: frozenset[Resource] = frozenset(get_args(Resource))

MIN_AGE_FLOOR = timedelta(seconds=120)
"""The smallest ``min_age`` accepted without ``allow_unsafe_min_age``: twice the 60 s TTL of the
sequenced stores' latest-version cache, whose probe is only sound while GC's min_age exceeds it."""

DEFAULT_MIN_AGE = timedelta(seconds=300)  # SlateDB's default for every directory


class GcOptions(BaseModel):
    """What one garbage collector deletes, and how old things must be first."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    manifest_min_age: Duration = DEFAULT_MIN_AGE
    """A ``.manifest`` file must be this old (by ``last_modified``) to be deleted (SlateDB's GC boundary-file
    design (docs/design/gc.md))."""
    compactions_min_age: Duration = DEFAULT_MIN_AGE
    """A ``.compactions`` file must be this old (by ``last_modified``) to be deleted (SlateDB's GC
    boundary-file design (docs/design/gc.md))."""
    wal_min_age: Duration = DEFAULT_MIN_AGE
    """A WAL SST must have been unreferenced this long (not merely written this long ago)."""
    compacted_min_age: Duration = DEFAULT_MIN_AGE
    """A compacted SST must have been unreferenced this long (not merely written this long ago)."""
    allow_unsafe_min_age: bool = False
    """Accept min ages below the floor. Tests only: see the module docstring."""
    delete_wal_fences: bool = False
    """Also delete WAL fence objects (window, legacy empty) once unreferenced. Off by default, as in
    SlateDB: a fence is what stops a zombie writer from writing that WAL id again."""
    db_delete_grace: Duration = timedelta(days=1)
    """A soft-destroyed database is deleted only this long after ``destroyed_at_s``."""
    interval: Duration = timedelta(seconds=600)
    """Pause between two runs of the long-running loop (SlateDB: 600 s)."""
    resources: frozenset[Resource] = Field(default=ALL_RESOURCES, min_length=1)
    """Which tasks run; default all."""

    @model_validator(mode="after")
    def _refuse_unsafe_min_age(self) -> GcOptions:
        if self.allow_unsafe_min_age:
            return self
        for name in ("manifest_min_age", "compactions_min_age", "wal_min_age", "compacted_min_age"):
            value: timedelta = getattr(self, name)
            if value < MIN_AGE_FLOOR:
                raise ValueError(
                    f"{name} {format_duration(value)} is below the floor of "
                    f"{format_duration(MIN_AGE_FLOOR)}: "
                    "an object written but not yet committed, or a cached manifest id, could be deleted "
                    "under a live writer or reader. Use a longer min age (tests only: "
                    "allow_unsafe_min_age=True)"
                )
        return self

    @classmethod
    def with_min_age(cls, min_age: timedelta, **options: object) -> GcOptions:
        """Options with the same ``min_age`` for every namespace."""
        ages = dict.fromkeys(
            ("manifest_min_age", "compactions_min_age", "wal_min_age", "compacted_min_age"), min_age
        )
        return cls.model_validate({**ages, **options})

    def runs(self, resource: Resource) -> bool:
        return resource in self.resources
