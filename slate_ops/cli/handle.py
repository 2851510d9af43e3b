"""How a command reaches its database: the admin handle (:func:`slate_ops.admin.open`), never an engine.

The global ``--engine {auto,slate_ops,slatedb}`` picks the engine (``auto``, the default, detects it
from the latest manifest's bytes: one LIST and one GET); every maintenance command then calls the
same :class:`~slate_ops.admin.DatabaseHandle` methods whichever engine wrote the database, so its
flags and JSON shapes are the same on both (docs/cli.md "Two engines").

A few commands act on slate_ops' own format only (the data commands, ``create-db``,
``read-manifest``, ``list-manifests``): :func:`require_slate_ops` refuses them on a SlateDB
database with :class:`~slate_ops.errors.UnsupportedOnEngineError` before anything is written.
"""

from __future__ import annotations

import argparse

from slate_ops import admin
from slate_ops.errors import DbNotFoundError, UnsupportedOnEngineError
from slate_ops.objstore import ObjectStore

AUTO = "auto"
SLATE_OPS = "slate_ops"
SLATEDB = "slatedb"
ENGINE_CHOICES = (AUTO, SLATE_OPS, SLATEDB)


def engine_of(args: argparse.Namespace) -> str | None:
    """The ``--engine`` given, or None for ``auto`` (detect it)."""
    engine: str = getattr(args, "engine", AUTO)
    return None if engine == AUTO else engine


def open_db(args: argparse.Namespace, store: ObjectStore, path: str | None = None) -> admin.DatabaseHandle:
    """The handle of the database at ``path`` (default ``--path``) on ``--engine``'s engine."""
    return admin.open(args.path if path is None else path, store, engine_of(args))


def require_slate_ops(args: argparse.Namespace, store: ObjectStore, command: str, instead: str) -> None:
    """Refuse ``command`` on a SlateDB database (``--engine slatedb``, or detected): it reads or
    writes slate_ops' own format. ``instead`` says what to use. A path holding no database passes
    (the command itself then refuses it or, where asked to, creates a slate_ops database)."""
    engine = engine_of(args)
    if engine is None:
        try:
            engine = open_db(args, store).engine.value
        except DbNotFoundError:
            return
    if engine == SLATEDB:
        raise UnsupportedOnEngineError(args.path, SLATEDB, f"`slate-ops {command}`", instead)
