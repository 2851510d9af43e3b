"""The bad-input table: a case's world (:class:`Env`), its CLI action (:class:`Cli`), the :class:`Case`
record, :func:`case` that registers one in :data:`CASES`, and the options and message fragments
several groups share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

import pytest

from slate_ops.engine import DbOptions, ReaderOptions
from slate_ops.errors import SlateOpsError
from slate_ops.objstore.base import ObjectStore

Writes = Literal["none", "net", "unconfirmed"]

QUIET = DbOptions(wal_flush_interval=timedelta(hours=1), manifest_poll_interval=timedelta(hours=1))
QUIET_READER = ReaderOptions(
    manifest_poll_interval=timedelta(hours=1), checkpoint_lifetime=timedelta(hours=3)
)
RESTORE = "restore it from a backup"  # CorruptObjectError's fix
UPGRADE = "Upgrade slate_ops"  # UnsupportedFormatVersionError's fix
NO_DB = "no database at"
BYTES_FIX = "encode text"  # a str (or other non-bytes) key or value
EMPTY_FIX = "at least one byte"  # an empty key
HEX_FIX = "even number of hex digits"  # a malformed hex: key or value on the command line


@dataclass
class Env:
    """One case's world: the store, values the case's templates refer to, things to close."""

    store: ObjectStore
    request: pytest.FixtureRequest
    monkeypatch: pytest.MonkeyPatch
    vars: dict[str, str] = field(default_factory=dict)
    objects: dict[str, Any] = field(default_factory=dict)
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    listing: ObjectStore | None = None  # what snapshots list (S3 cases: a client with good credentials)

    @property
    def url(self) -> str:
        return self.vars.get("url", self.store.url)

    def format(self, template: str) -> str:
        return template.format(**self.vars)


@dataclass(frozen=True)
class Cli:
    """A ``slate-ops`` command line; ``--store`` is prepended. Items are ``Env.vars`` templates."""

    argv: tuple[str, ...]

    def resolve(self, env: Env) -> list[str]:
        return ["--store", env.url, *(env.format(a) for a in self.argv)]


def cli(*argv: str) -> Cli:
    return Cli(argv)


Action = Callable[[Env], object] | Cli
Setup = Callable[[Env], None]


@dataclass(frozen=True)
class Case:
    group: str
    name: str
    setup: Setup
    action: Action
    expect: type[SlateOpsError] | int | None  # an error type, a CLI exit code, or None: succeeds
    contains: tuple[str, ...] = ()  # Env.vars templates the message must contain
    writes: Writes = "none"
    db: str = "db"  # the database whose latest manifest "net" compares
    marks: tuple[pytest.MarkDecorator, ...] = ()


CASES: list[Case] = []


def case(
    group: str,
    name: str,
    setup: Setup,
    action: Action,
    expect: type[SlateOpsError] | int | None,
    *contains: str,
    writes: Writes = "none",
    db: str = "db",
    marks: tuple[pytest.MarkDecorator, ...] = (),
) -> None:
    CASES.append(Case(group, name, setup, action, expect, contains, writes, db, marks))


def summary() -> dict[str, int]:
    """The catalogue's size per group, in the catalogue's order (docs/reliability.md quotes it)."""
    groups: dict[str, int] = {}
    for entry in CASES:
        groups[entry.group] = groups.get(entry.group, 0) + 1
    return groups
