"""One admin handle over both engines: :func:`open` a database and call the same operations on it,
whichever engine wrote it (docs/design/slatedb-engine.md, §6 capability table and §7 decisions).

* :class:`~.protocol.DatabaseHandle` -- the operations (the CLI and Dagster call only these);
* :class:`~.slate_ops_handle.SlateOpsHandle` -- a slate_ops database: today's admin functions;
* :class:`~.slatedb_handle.SlateDbHandle` -- a SlateDB database through SlateDB's binding, with
  slate_ops' report types and rules;
* :mod:`~.metered` -- each maintenance operation's report carries the object-store requests it made.

Layers: ``admin`` sits above ``engines`` (the import-linter layer contract); the binding itself is
imported only inside ``slate_ops.engines.slatedb``, lazily.
"""

from __future__ import annotations

from collections.abc import Sequence

from slate_ops.admin.handle.metered import with_requests
from slate_ops.admin.handle.protocol import DatabaseHandle
from slate_ops.admin.handle.slate_ops_handle import SlateOpsHandle
from slate_ops.admin.handle.slatedb_handle import SlateDbHandle
from slate_ops.admin.rescale import RescaleReport
from slate_ops.admin.rescale import merge as merge_slate_ops
from slate_ops.engines.detect import Engine
from slate_ops.engines.probe import probe_db
from slate_ops.errors import InvalidArgumentError, UnsupportedFormatVersionError
from slate_ops.layout import normalize_db_path
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import MeteredStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime

__all__ = ["DatabaseHandle", "SlateDbHandle", "SlateOpsHandle", "merge", "open"]


def open(
    path: str,
    store: ObjectStore,
    engine: Engine | str | None = None,
    *,
    clock: Runtime = SYSTEM_RUNTIME,
) -> DatabaseHandle:
    """The handle of the database at ``path`` in ``store``.

    ``engine`` None: detected from the latest manifest (:func:`~slate_ops.engines.probe.probe_db`:
    one LIST, one GET; :class:`DbNotFoundError` without a manifest). ``"slate_ops"`` or
    ``"slatedb"`` forces it and reads nothing (the fleet's ``engine:``, the CLI's ``--engine``); a
    wrong forced engine fails safe on the first call (ours raises ``SlateDbManifestError``,
    SlateDB's binding a :class:`~slate_ops.errors.SlateDbError`).

    A SlateDB manifest of a version the pinned binding does not read raises
    :class:`UnsupportedFormatVersionError` naming both versions; a SlateDB database without the
    binding installed raises ``SlateDbBindingMissingError`` (``pip install 'slate_ops[slatedb]'``).
    """
    db = normalize_db_path(path)
    if engine is None:
        probe = probe_db(db, store)
        chosen = probe.detection.engine
        if chosen is Engine.SLATEDB and not probe.detection.supported:
            raise UnsupportedFormatVersionError(
                probe.key, probe.detection.format_version, probe.detection.supported_versions
            )
    else:
        try:
            chosen = Engine(engine)
        except ValueError:
            raise InvalidArgumentError(
                f"engine {engine!r}: expected one of {', '.join(e.value for e in Engine)}"
            ) from None
    if chosen is Engine.SLATE_OPS:
        return SlateOpsHandle(db, store, clock=clock)
    return SlateDbHandle(db, store, clock=clock)


def merge(
    source_paths: Sequence[str],
    store: ObjectStore,
    target_path: str,
    *,
    engine: Engine | str | None = None,
    clock: Runtime = SYSTEM_RUNTIME,
    flush_wal: bool = False,
) -> RescaleReport:
    """Merge the databases at ``source_paths`` (disjoint key ranges) into a new one at
    ``target_path``, on the sources' engine (all sources must share one). ``flush_wal``: first move
    each source's WAL-only writes into L0 (opens each as its writer: FENCES running writers)."""
    handles = [open(p, store, engine, clock=clock) for p in source_paths]
    engines = {h.engine for h in handles}
    if len(engines) > 1:
        raise InvalidArgumentError(
            "cannot merge databases of different engines: "
            + ", ".join(f"{h.path} ({h.engine.value})" for h in handles)
        )
    if not handles or handles[0].engine is Engine.SLATE_OPS:
        meter = MeteredStore(store)  # the report's requests, as a handle's operations count them
        if flush_wal:
            for h in handles:
                assert isinstance(h, SlateOpsHandle)
                h.on_store(meter).flush_wal()
        return with_requests(merge_slate_ops(source_paths, meter, target_path, clock=clock), meter.counts)
    first = handles[0]
    assert isinstance(first, SlateDbHandle)
    return first.merge_with([h.path for h in handles[1:]], target_path, flush_wal=flush_wal)


# mypy checks that both engines implement every operation of the protocol with its signature.
_ENGINES: tuple[type[DatabaseHandle], ...] = (SlateOpsHandle, SlateDbHandle)
