"""Every error slate_ops raises, in one flat hierarchy.

Messages say what happened, to which object or path, and what the caller can do about it.
"""

from __future__ import annotations


class SlateOpsError(Exception):
    """Base class of every error raised by slate_ops."""


class InvalidArgumentError(SlateOpsError, ValueError):
    """An argument has the wrong type or value; nothing was read or written."""


class InvalidDurationError(InvalidArgumentError):
    """A duration string such as ``"7days 30min 10s"`` could not be parsed."""


class InvalidDatabaseNameError(InvalidArgumentError):
    """A database path (name) is refused: one of its components is a directory name the layout
    reserves (``wal``, ``manifest``, ...), ``.`` or ``..``, or it holds a backslash or a control
    character, or it is too long; the message names the rule and the component (docs/design/names.md)."""


class InvalidStoreUrlError(InvalidArgumentError):
    """A store URL has an unknown scheme or is missing a required part."""


class StoreNotFoundError(InvalidStoreUrlError):
    """A local store's root directory does not exist, so there is nothing to read; nothing was created.

    The message names the directory and, when the text looks like a mistyped scheme (``s3//bucket``),
    the URL that was probably meant.
    """


class ConfigError(SlateOpsError):
    """A slate_ops configuration file is missing, unreadable or invalid."""


# --- object stores ----------------------------------------------------------------------------


class ObjectStoreError(SlateOpsError):
    """An object-store request failed; ``key`` names the object."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class ObjectNotFoundError(ObjectStoreError):
    """The object does not exist."""


class PreconditionFailedError(ObjectStoreError):
    """A conditional put lost: the object already exists (create) or its etag changed (if-match)."""


class ObjectStoreCredentialsError(ObjectStoreError):
    """The object store found no credentials, or refused the ones given; the message names the
    bucket and the settings to fix (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, a profile, the
    store URL's options, or the fleet config's ``SLATE_OPS_S3_*`` variables)."""


class PutOutcomeUnknownError(ObjectStoreError):
    """A put timed out or its connection broke, so whether it was applied is not known yet.

    Callers resolve it with :func:`slate_ops.objstore.resolve_put_outcome`, which reads back the
    unique put id stored in the object's metadata; it is never guessed.
    """

    def __init__(self, message: str, key: str, put_id: str) -> None:
        super().__init__(message, key)
        self.put_id = put_id


# --- stored objects ---------------------------------------------------------------------------


RESTORE_CORRUPT_OBJECT = (
    "Do not edit it by hand: restore it from a backup of the store, or read the data from a "
    "checkpoint or a clone"
)


class CorruptObjectError(SlateOpsError):
    """A stored object is truncated or fails its checksum; ``path`` names it, ``fix`` says what to do.

    The message ends with ``fix``: by default, do not edit the object by hand but restore it from a
    backup, or read the data from a checkpoint or a clone (:data:`RESTORE_CORRUPT_OBJECT`).
    """

    def __init__(self, path: str, reason: str, fix: str = RESTORE_CORRUPT_OBJECT) -> None:
        super().__init__(f"{path} is corrupt: {reason}. {fix}")
        self.path = path
        self.reason = reason
        self.fix = fix


class UnsupportedFormatVersionError(CorruptObjectError):
    """A stored object was written in a format version this slate_ops does not know.

    Upgrade slate_ops to a release that reads this version.
    """

    def __init__(self, path: str, version: int, supported: tuple[int, ...]) -> None:
        SlateOpsError.__init__(
            self,
            f"{path} has format version {version}; this slate_ops reads versions "
            f"{', '.join(map(str, supported))}. Upgrade slate_ops to read it.",
        )
        self.path = path
        self.reason = f"unsupported format version {version}"
        self.fix = "Upgrade slate_ops to read it."
        self.version = version


class SlateDbManifestError(CorruptObjectError):
    """A manifest written by SlateDB, not by slate_ops, read by slate_ops' own engine: the path holds a
    SlateDB database, which only the admin handle's SlateDB engine maintains. It refuses and changes
    nothing; open the database through :func:`slate_ops.admin.open` (engine detected; the CLI's
    ``--engine auto`` or ``slatedb``), or keep slate_ops' databases under other paths.
    """

    def __init__(self, path: str, version: int) -> None:
        fix = (
            "Open it through the admin handle, which detects the engine (slate_ops.admin.open; on the "
            "CLI --engine auto, the default, or --engine slatedb)."
        )
        SlateOpsError.__init__(
            self,
            f"{path} is a SlateDB manifest (SlateDB format version {version}), not a slate_ops one: the "
            "database was written by SlateDB, which slate_ops' own engine cannot read; nothing was "
            f"changed. {fix}",
        )
        self.path = path
        self.reason = f"a SlateDB manifest (format version {version})"
        self.fix = fix
        self.version = version


class UnsupportedOnEngineError(SlateOpsError):
    """An operation the database's engine cannot do (docs/design/slatedb-engine.md, the capability
    table): e.g. a soft destroy or a rollback in place of a SlateDB database. Nothing was changed."""

    def __init__(self, path: str, engine: str, operation: str, why: str) -> None:
        super().__init__(
            f"{operation} is not supported on {engine} databases ({path}): {why}; nothing was changed"
        )
        self.path = path
        self.engine = engine
        self.operation = operation


# --- sequenced commits ------------------------------------------------------------------------


class SequenceConflictError(SlateOpsError):
    """Another process created the sequenced object with this id first (create-if-absent lost)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} already exists: another process committed this version first")
        self.path = path


class CommitRetriesExhaustedError(SlateOpsError):
    """A sequenced update kept losing create-if-absent races and gave up after its retry budget."""


class BoundaryViolationError(SlateOpsError):
    """A sequenced object was created at an id the GC boundary already covers (SlateDB's GC boundary-file
    design (docs/design/gc.md)).

    The write is not committed: a newer version superseded it and GC may have deleted it.
    """

    def __init__(self, path: str, object_id: int, boundary: int) -> None:
        super().__init__(
            f"{path} was created at id {object_id}, at or behind the GC boundary {boundary}; "
            "the write is not committed. Re-read the latest version and retry."
        )
        self.path = path
        self.object_id = object_id
        self.boundary = boundary


class NamespaceDeletedError(SlateOpsError):
    """The versions of a sequenced namespace that this process read were deleted and nothing newer exists.

    The database was destroyed (hard destroy, or GC of a soft-destroyed database): the process's cached
    state describes a database that is gone. Nothing was committed; close the instance and reopen the
    path (a new database there holds nothing old).
    """

    def __init__(self, directory: str, version_id: int) -> None:
        super().__init__(
            f"{directory}: version {version_id}, which this process read, was deleted or replaced and "
            "nothing newer exists — the database was destroyed or deleted. Nothing was committed; close "
            "this instance and reopen the path"
        )
        self.directory = directory
        self.version_id = version_id


class BoundaryMissingError(SlateOpsError):
    """A GC boundary file that this process saw before has disappeared.

    GC never deletes boundary files, so someone removed it by hand; stop all writers and GC, and
    restore it with a value at least as high as the one reported.
    """


class FencedError(SlateOpsError):
    """A newer writer or compactor has bumped the epoch; this instance may no longer commit.

    Nothing after the fence was committed by this instance. Close it; open a new one if needed.
    """

    def __init__(self, path: str, role: str, own_epoch: int, stored_epoch: int) -> None:
        super().__init__(
            f"{role} at {path} is fenced: its epoch is {own_epoch} but the manifest holds "
            f"{stored_epoch}. A newer {role} took over; close this instance."
        )
        self.path = path
        self.role = role
        self.own_epoch = own_epoch
        self.stored_epoch = stored_epoch


class DbDeletedError(FencedError):
    """The database this writer or compactor holds was destroyed or deleted under it.

    A :class:`FencedError`: nothing is committed or acknowledged after the deletion was observed. Close
    the instance; a new database at the path holds nothing old.
    """

    def __init__(self, path: str, role: str, own_epoch: int, detail: str | None = None) -> None:
        detail = detail or "the manifest it committed or read is gone and nothing newer exists"
        SlateOpsError.__init__(
            self,
            f"{role} at {path} is fenced: the database was destroyed or deleted under it ({detail}). "
            "Nothing was acknowledged or committed after that; close this instance, and reopen the path "
            "only to start a new database.",
        )
        self.path = path
        self.role = role
        self.own_epoch = own_epoch
        self.stored_epoch = own_epoch


class EpochCollisionError(FencedError):
    """Another process writes the database with the same writer epoch (its WAL SST holds our next id).

    Two processes cannot legitimately share an epoch; the writer stops (every later call raises this) rather
    than retrying. Stop every other process writing the database, then reopen.
    """

    def __init__(self, path: str, role: str, own_epoch: int, key: str) -> None:
        SlateOpsError.__init__(
            self,
            f"{role} at {path} stops: {key} holds another process's WAL data although the manifest still "
            f"shows this {role}'s epoch {own_epoch} — another process writes this database with the same "
            "epoch. Stop every other writer of the database, then reopen.",
        )
        self.path = path
        self.role = role
        self.own_epoch = own_epoch
        self.stored_epoch = own_epoch
        self.key = key


class WalChainOvertakenError(SlateOpsError):
    """An opener fencing the end of the WAL chain found more than ``WAL_FENCE_WINDOW`` ids created under
    it one after another: another process is writing the WAL. The caller confirms its epoch (a newer
    epoch: :class:`FencedError`; still its own: :class:`EpochCollisionError`)."""

    def __init__(self, key: str, steps: int) -> None:
        super().__init__(f"{key}: {steps} WAL ids were created while fencing the end of the WAL chain")
        self.key = key
        self.steps = steps


# --- databases and checkpoints ----------------------------------------------------------------


class DbNotFoundError(SlateOpsError):
    """There is no database (no manifest) at the path."""


class StoreRootNotFoundError(StoreNotFoundError, DbNotFoundError):
    """A database was looked for in a local store whose root directory does not exist (a mistyped
    ``file://`` root, ``$SLATE_OPS_STORE`` or fleet ``store_url``): both no store and no database, so
    it is caught as either. The message names the directory; nothing was read or created."""


class DbAlreadyExistsError(SlateOpsError):
    """A database already exists at the path."""


class DbNotInitializedError(SlateOpsError):
    """The database's manifest has ``initialized=false``: a clone or union has not finished.

    Re-run the operation that created it to complete initialisation.
    """


class DbDestroyedError(SlateOpsError):
    """The database has been destroyed (``destroyed_at_s`` is set) and cannot be used."""


class CheckpointNotFoundError(SlateOpsError):
    """No checkpoint with this id exists in the database's current manifest."""


class CheckpointExpiredError(SlateOpsError):
    """The checkpoint exists but its expiry time has passed; refresh it or use another one."""


class CheckpointProtectedError(SlateOpsError):
    """The checkpoint protects another database (a clone's, shard's or merge target's final checkpoint,
    or the source checkpoint of a clone, split or merge in progress) or is a tag, so it cannot be given
    an expiry, shortened or deleted by hand; nothing was written. The message names the database that
    depends on it and the command that releases it properly (destroy that database, or let the
    operation finish; for a tag, ``delete-tag``)."""


class TagExistsError(SlateOpsError):
    """A tag with this name already exists; delete it first or create the new one with ``replace``."""


class TagNotFoundError(SlateOpsError):
    """No tag with this name exists in the database's current manifest."""


class InvalidDeletionError(SlateOpsError):
    """A deletion was refused because something still needs the data (e.g. unexpired checkpoints)."""


class GcFailedError(SlateOpsError):
    """A garbage-collection run recorded errors; ``report`` (a ``slate_ops.gc.GcReport``) lists them
    together with everything the run did delete. GC deletes only what its rules allow even when a
    step fails; fix the cause (the errors name the objects) and run it again."""

    def __init__(self, message: str, report: object) -> None:
        super().__init__(message)
        self.report = report


class CloneMismatchError(SlateOpsError):
    """A database exists at the clone path but is not a clone of the given parent and checkpoint.

    Re-run the clone with its original arguments, or destroy the database at the clone path first.
    """


class CloneWalMissingError(SlateOpsError):
    """A parent WAL SST that the clone's source checkpoint covers is missing, so cloning would lose writes.

    Destroy the unfinished clone and clone again from a newer checkpoint.
    """


# --- the engine -------------------------------------------------------------------------------


class DbClosedError(SlateOpsError):
    """The Db or DbReader was closed (or failed earlier); open a new one."""


class BackpressureTimeoutError(SlateOpsError):
    """Writes stalled longer than the configured bound because L0 or unflushed memory is full.

    Run a compactor (it relieves L0), raise ``l0_max_ssts`` / ``max_unflushed_bytes``, or wait longer.
    """


class OutOfRangeError(InvalidArgumentError):
    """A key lies outside the database's visible range (after a projection)."""


class OverlappingSourcesError(InvalidArgumentError):
    """Two databases given to a merge (union) hold keys in a common range; nothing was written.

    The message names both sources and the overlapping range. Merge only databases with disjoint
    key ranges (the shards of a split, or independently keyed databases).
    """


class NonAdjacentSourcesError(InvalidArgumentError):
    """Merge sources with explicit key ranges leave a gap between two of them; nothing was written.

    The merged database gets one contiguous range, so shards must be merged with their neighbours.
    """


class WalNotFlushedError(SlateOpsError):
    """A split or merge source has writes only in its WAL; projection and union carry no WAL.

    Flush the writer's memtable to L0 (``Db.flush_memtable()``, or ``slate-ops --path DB flush``,
    which opens the database as its writer and so fences the current one), then retry.
    """


class CompactionConflictError(SlateOpsError):
    """The manifest changed under a compaction in a way the merge rule cannot reconcile.

    Only another compactor removes L0 views or sorted runs, so this means two compactors ran at
    once without fencing; the compaction's outputs are orphans that GC removes.
    """


# --- Spark data pipeline ----------------------------------------------------------------------


class BulkLoadInputError(InvalidArgumentError):
    """A bulk load's DataFrame has a missing or non-binary key or value column, a null, or an empty key.

    Checked before anything is written: the store is unchanged. Cast or filter the columns and retry.
    """


class DuplicateKeyError(BulkLoadInputError):
    """A bulk load's DataFrame holds a key more than once; ``key`` is one of them.

    Nothing was committed; the SSTs already written were deleted. Deduplicate first.
    """

    def __init__(self, message: str, key: bytes) -> None:
        super().__init__(message)
        self.key = key


class BulkLoadFailedError(SlateOpsError):
    """A bulk load's Spark job failed; nothing was committed and the SSTs its tasks wrote were deleted.

    Read the task's Python exception in the message, fix its cause, and load again.
    """


class BulkLoadOverlapError(BulkLoadInputError):
    """The Spark partitions of a ``df.write.format("slate_ops")`` overlap in key range.

    Each task writes one key-ordered run of SSTs and the load commits them as one run, so every
    partition must hold its own key range. Nothing was committed and the SSTs were deleted: write
    ``df.repartitionByRange(n, "key")`` instead.
    """


class BulkLoadConflictError(BulkLoadFailedError):
    """The database was written between the start of a ``df.write.format("slate_ops")`` and its commit.

    The write reserved a sequence number above all stored data when it started; a writer that
    wrote since makes that number stale. Nothing was committed and the SSTs were deleted: stop the
    writers of the database (or use ``slate_ops.spark.bulk_load``, which holds the writer role for
    the whole load) and write again.
    """


class UnsupportedSaveModeError(InvalidArgumentError):
    """A ``df.write.format("slate_ops")`` asked for a save mode other than ``append``.

    Loaded rows are added to the database (newer versions shadow older ones); nothing is deleted.
    Use ``.mode("append")``; to replace a database, create a new one (or delete its keys first).
    """


# --- SlateDB databases (slate_ops.engines.slatedb) ---

SLATEDB_PINNED_VERSION = "0.17.0"
SLATEDB_EXTRA = "slate_ops[slatedb]"


class SlateDbBindingMissingError(SlateOpsError):
    """A SlateDB database needs SlateDB's Python binding, which is not installed."""

    def __init__(self, cause: BaseException | None = None) -> None:
        super().__init__(
            f"this is a SlateDB database; maintaining it needs SlateDB's Python binding "
            f"(slatedb=={SLATEDB_PINNED_VERSION}): pip install '{SLATEDB_EXTRA}'"
            + (f" ({cause})" if cause else "")
        )


class SlateDbError(SlateOpsError):
    """The binding refused or failed an operation on a SlateDB database; names the database."""

    def __init__(self, db_path: str, operation: str, cause: BaseException) -> None:
        super().__init__(f"SlateDB database {db_path}: {operation} failed: {cause}")
        self.db_path = db_path
        self.operation = operation
        self.cause = cause


class SlateDbForkError(SlateOpsError):
    """This process was forked from one that had used SlateDB's binding; the binding cannot be
    used in it (its Rust runtime did not survive the fork)."""

    def __init__(self, parent_pid: int, child_pid: int) -> None:
        super().__init__(
            f"SlateDB's binding was used in process {parent_pid} before it forked this one "
            f"({child_pid}); it hangs in a forked child. Start workers with the 'spawn' method, "
            "or use the binding only after the fork"
        )
        self.parent_pid = parent_pid


class SlateDbWalNotFlushedError(WalNotFlushedError):
    """A SlateDB database given to a split or merge has data WAL SSTs in its replay range, which
    SlateDB refuses for a projection or union clone ("Projection and/or union with WAL is not
    supported"); nothing was written. Stop its writer, then retry with ``flush_wal=True``."""

    def __init__(self, db_path: str, wal_ids: list[int]) -> None:
        super().__init__(
            f"SlateDB database {db_path} has data in WAL SST(s) {wal_ids} of its replay range; SlateDB "
            "refuses to split or merge it (projection/union with WAL). Stop its writer, then retry with "
            "flush_wal=True (`--flush-wal`): slate_ops then opens it as its writer, flushes the WAL to "
            "L0 and closes (this FENCES a running writer). Nothing was written"
        )
        self.db_path = db_path
        self.wal_ids = wal_ids


class TargetNotEmptyError(DbAlreadyExistsError):
    """The path a clone, restore, split or merge would create a database at already holds objects
    (a database, or objects that are not one); nothing was written."""

    def __init__(self, location: str, sample: list[str], is_db: bool) -> None:
        what = "a database" if is_db else f"{len(sample)}+ object(s) that are not a database"
        super().__init__(
            f"{location} already holds {what} (e.g. {', '.join(sample[:3])}); choose an empty path, "
            "or destroy what is there first. Nothing was written"
        )
        self.location = location


class NoCompactorError(SlateOpsError):
    """A compaction was submitted to a SlateDB database but no compactor picked it up in time: SlateDB
    compacts only where a compactor runs (a writer's embedded one or a standalone one). The request
    stays queued in the database's ``compactions/`` file and runs when a compactor starts."""

    def __init__(self, db_path: str, compaction_id: str, waited_s: float) -> None:
        super().__init__(
            f"SlateDB database {db_path}: compaction {compaction_id} is still SUBMITTED after "
            f"{waited_s:.1f} s: no SlateDB compactor picked it up. A SlateDB compactor must be running "
            "(open a writer with its embedded compactor, or start a standalone compactor); the request "
            "stays queued and runs when one starts, so do not submit it again"
        )
        self.db_path = db_path
        self.compaction_id = compaction_id
        self.waited_s = waited_s


class SlateDbCompactionTimeoutError(SlateOpsError):
    """A SlateDB compactor picked a submitted compaction up but did not finish it in the time
    allowed; it goes on in that compactor, and a later compaction request follows it."""

    def __init__(self, db_path: str, compaction_id: str, status: str, waited_s: float) -> None:
        super().__init__(
            f"SlateDB database {db_path}: compaction {compaction_id} is still {status} after "
            f"{waited_s:.1f} s; it goes on in SlateDB's compactor. Ask again later (the next request "
            "follows it instead of submitting another) or allow a longer timeout"
        )
        self.db_path = db_path
        self.compaction_id = compaction_id
        self.status = status


class SlateDbCompactionFailedError(SlateOpsError):
    """SlateDB's compactor reported a submitted compaction FAILED (e.g. its own scheduler had taken
    some of the same sources); the database is unchanged by it."""

    def __init__(self, db_path: str, compaction_id: str, sources: int) -> None:
        super().__init__(
            f"SlateDB database {db_path}: compaction {compaction_id} of {sources} source(s) FAILED in "
            "SlateDB's compactor; the database is unchanged. Check the compactor's log, then ask again "
            "(its own scheduler may have compacted these sources meanwhile)"
        )
        self.db_path = db_path
        self.compaction_id = compaction_id


class UnsupportedStoreError(SlateOpsError):
    """The binding cannot be given this store (only local directories so far)."""


class SlateDbTimeoutError(SlateDbError):
    """A call of SlateDB's binding on a database did not return within its bound and was cancelled
    (the binding retries some failures forever instead of raising). Nothing was written by
    slate_ops; a write the binding had begun may or may not have landed. The message names the
    database, the operation, the bound and the likely causes, with what to do about each."""

    def __init__(self, db_path: str, operation: str, timeout_s: float, causes: str | None = None) -> None:
        cause = TimeoutError(f"no answer from SlateDB's binding within {timeout_s:g} s; cancelled")
        SlateOpsError.__init__(
            self,
            f"SlateDB database {db_path}: {operation} did not return within {timeout_s:g} s and was "
            "cancelled. "
            + (
                causes
                or "Likely causes: the object store is unreachable or its credentials are refused "
                "(check the store URL, endpoint and credentials), the bucket does not exist (create it "
                "or fix the URL), or gc/manifest.boundary is at or above the latest manifest id (run "
                "`slate-ops verify` on the database: its boundaries_below_latest check names the file; "
                "GC may already have deleted the current manifest, so restore from a backup or "
                "checkpoint). If the store is just slow, allow a longer bound (timeouts= on "
                "SlateDbAdmin / SlateDbHandle)"
            ),
        )
        self.db_path = db_path
        self.operation = operation
        self.cause = cause
        self.timeout_s = timeout_s
