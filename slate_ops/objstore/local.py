"""A store on a local (POSIX) filesystem (``file://``): one file per object under a root directory.

Every put writes a complete, fsynced temp file next to its target and then publishes it with one
atomic directory operation, so readers never see a partial object and a crash leaves either the
old or the new version (plus, at worst, an orphaned ``.tmp-`` file that ``list`` ignores).

Conditional puts are made atomic across threads and processes with ``fcntl.flock`` on lock files
under ``<root>/.locks/``. All mutations of a key (every put mode and delete) take the key's lock,
so an overwrite or delete cannot slip between an if-match's etag check and its rename. There are
a fixed number of lock files (keys are hashed onto stripes) so they never accumulate. The root and
``.locks/`` are created by the first write, never by opening the store or reading it.

Limitations of mapping keys to paths: a key cannot be both an object and a "directory" of other
keys (``a`` and ``a/b``), and keys whose first segment is ``.locks`` or with a segment starting
with ``.tmp-`` are refused because those names are reserved for the store's own files.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from slate_ops.errors import (
    DbNotFoundError,
    InvalidArgumentError,
    ObjectNotFoundError,
    ObjectStoreError,
    PreconditionFailedError,
    StoreRootNotFoundError,
)
from slate_ops.objstore.base import (
    GetResult,
    ObjectMeta,
    ObjectStore,
    PutMode,
    PutResult,
    new_put_id,
    validate_key,
    validate_range,
)
from slate_ops.objstore.metering import MeteredStore

_OVERWRITE = PutMode.overwrite()  # a module constant: ruff B008 forbids calls in defaults

_TMP_PREFIX = ".tmp-"
_LOCK_DIR = ".locks"
_LOCK_STRIPES = 256
_PUT_ID_XATTR = "user.slate_ops.put_id"
_NO_XATTR = {errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENODATA}
_READ_CHUNK = 1 << 30  # below Linux's ~2 GiB cap on a single read


class LocalStore:
    """Objects as files under ``root``; strongly consistent, durable once ``put`` returns.

    The etag is ``inode-mtime_ns-size[-hash(put_id)]``. Each put publishes a fresh inode, stamps
    its mtime with ``time.time_ns()`` and (where xattrs work) tags it with its unique put id, so an
    etag does not repeat even when the filesystem reuses a freed inode number within one
    timestamp tick, which would otherwise let a stale if-match succeed (ABA).
    """

    def __init__(self, root: str | Path) -> None:
        # Nothing is created here: the root and its lock directory appear with the first write
        # (put, or delete of an existing object), so opening a store and reading it change nothing
        # on disk, even when the root was mistyped (docs/cli.md "Safety").
        self._root = Path(root).absolute()
        self._lock_dir = self._root / _LOCK_DIR

    @property
    def root(self) -> Path:
        return self._root

    @property
    def url(self) -> str:
        return self._root.as_uri()

    # --- reads -------------------------------------------------------------------------------

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        path = self._path(key)
        validate_range(key, byte_range)
        with self._open_object(key, path) as fd:
            meta = _meta_from_fd(key, fd)
            start, end = byte_range if byte_range is not None else (0, meta.size)
            data = _pread_all(fd, start, min(end, meta.size) - start) if start < meta.size else b""
        return GetResult(data, meta)

    def head(self, key: str) -> ObjectMeta:
        path = self._path(key)
        with self._open_object(key, path) as fd:
            return _meta_from_fd(key, fd)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        """Walk only the directory named by ``prefix``'s complete segments, in key order.

        Entries of a directory are visited sorted by ``name`` for files and ``name + "/"`` for
        subdirectories: that is exactly the order of the keys they produce, so the walk yields
        keys globally sorted without collecting them first. Subtrees wholly at or before
        ``start_after`` are skipped without being read.
        """
        dir_part, _, name_prefix = prefix.rpartition("/")
        if dir_part and not _is_valid_dir(dir_part):
            return iter(())  # no valid key can start with this prefix
        base = f"{dir_part}/" if dir_part else ""
        return self._walk(base, name_prefix, start_after)

    def _walk(self, base: str, name_prefix: str, start_after: str | None) -> Iterator[ObjectMeta]:
        try:
            entries = list(os.scandir(self._root / base if base else self._root))
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            raise ObjectStoreError(f"list of {self.url}/{base} failed: {exc}") from exc
        candidates: list[tuple[str, bool]] = []
        for entry in entries:
            name = entry.name
            if not name.startswith(name_prefix) or name.startswith(_TMP_PREFIX):
                continue
            if not base and name == _LOCK_DIR:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    candidates.append((f"{base}{name}/", True))
                elif entry.is_file(follow_symlinks=False):
                    candidates.append((f"{base}{name}", False))
            except FileNotFoundError:
                continue
        candidates.sort()
        for sort_key, is_dir in candidates:
            if start_after is not None and sort_key <= start_after and not start_after.startswith(sort_key):
                continue  # every key here is <= start_after
            if is_dir:
                yield from self._walk(sort_key, "", start_after)
                continue
            if start_after is not None and sort_key <= start_after:
                continue
            try:
                with self._open_object(sort_key, self._root / sort_key) as fd:
                    meta = _meta_from_fd(sort_key, fd)
            except ObjectNotFoundError:
                continue  # deleted while listing
            yield meta

    # --- writes ------------------------------------------------------------------------------

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        path = self._path(key)
        put_id = put_id or new_put_id()
        # Fail fast before writing anything: etags never repeat, so a mismatch seen now is final
        # (and a valid point at which to linearise the failure).
        self._check_precondition(key, path, mode)
        self._make_parents(key, path)
        tmp = path.with_name(f"{_TMP_PREFIX}{uuid.uuid4().hex}")  # noqa: TID251 - unique across processes
        try:
            etag = _write_temp(tmp, data, put_id)
            with self._lock(key):
                self._check_precondition(key, path, mode)
                if mode.kind == "create":
                    os.link(tmp, path)  # atomic; FileExistsError if someone bypassed the lock
                    os.unlink(tmp)
                else:
                    os.replace(tmp, path)
                _fsync_dir(path.parent)
        except FileExistsError as exc:
            raise PreconditionFailedError(f"{self.url}/{key} already exists", key) from exc
        except IsADirectoryError as exc:
            raise ObjectStoreError(
                f"cannot put {self.url}/{key}: a directory of other keys has that name", key
            ) from exc
        except OSError as exc:
            raise ObjectStoreError(f"put of {self.url}/{key} failed: {exc}", key) from exc
        finally:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                os.unlink(tmp)  # still there unless published or never created
        return PutResult(etag, put_id)

    def delete(self, key: str) -> None:
        path = self._path(key)
        if not os.path.lexists(path):
            return  # no such object now (the delete's linearisation point): nothing to lock or write
        with self._lock(key):
            try:
                os.unlink(path)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                return  # no such object (a directory of other keys is not one either)
            except OSError as exc:
                raise ObjectStoreError(f"delete of {self.url}/{key} failed: {exc}", key) from exc
            try:
                _fsync_dir(path.parent)
            except OSError as exc:
                raise ObjectStoreError(f"delete of {self.url}/{key} failed: {exc}", key) from exc

    # --- helpers -----------------------------------------------------------------------------

    def _path(self, key: str) -> Path:
        validate_key(key)
        parts = key.split("/")
        if parts[0] == _LOCK_DIR or any(p.startswith(_TMP_PREFIX) for p in parts):
            raise InvalidArgumentError(
                f"object key {key!r} uses a name reserved by the local store "
                f"(first segment {_LOCK_DIR!r} or a segment starting with {_TMP_PREFIX!r})"
            )
        return self._root.joinpath(*parts)

    def _check_precondition(self, key: str, path: Path, mode: PutMode) -> None:
        if mode.kind == "overwrite":
            return
        try:
            with self._open_object(key, path) as fd:
                current: ObjectMeta | None = _meta_from_fd(key, fd)
        except ObjectNotFoundError:
            current = None
        if mode.kind == "create" and current is not None:
            raise PreconditionFailedError(f"{self.url}/{key} already exists", key)
        if mode.kind == "if_match":
            if current is None:
                raise PreconditionFailedError(f"{self.url}/{key} does not exist (if-match {mode.etag})", key)
            if current.etag != mode.etag:
                raise PreconditionFailedError(f"{self.url}/{key} does not match etag {mode.etag}", key)

    def _make_parents(self, key: str, path: Path) -> None:
        """Create missing parent directories, fsyncing each new one's parent so it survives a crash."""
        if not self._root.is_dir():
            try:
                self._root.mkdir(parents=True, exist_ok=True)  # the store's first write
            except OSError as exc:
                raise ObjectStoreError(
                    f"cannot put {self.url}/{key}: cannot create the root: {exc}", key
                ) from exc
        missing: list[Path] = []
        parent = path.parent
        while parent != self._root and not parent.is_dir():
            missing.append(parent)
            parent = parent.parent
        for directory in reversed(missing):
            try:
                try:
                    os.mkdir(directory)
                except FileExistsError:
                    if not directory.is_dir():
                        raise NotADirectoryError(errno.ENOTDIR, "an object has this name") from None
                _fsync_dir(directory.parent)
            except OSError as exc:  # e.g. NotADirectoryError: an object has the directory's name
                raise ObjectStoreError(
                    f"cannot put {self.url}/{key}: cannot create directory {directory}: {exc}", key
                ) from exc

    @contextlib.contextmanager
    def _lock(self, key: str) -> Iterator[None]:
        stripe = hashlib.sha256(key.encode()).digest()[0] % _LOCK_STRIPES
        path = self._lock_dir / f"{stripe:02x}"
        try:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except FileNotFoundError:  # the first write: the lock directory is created lazily
                self._lock_dir.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ObjectStoreError(f"cannot open lock file {path} for {key}: {exc}", key) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    @contextlib.contextmanager
    def _open_object(self, key: str, path: Path) -> Iterator[int]:
        """Open the current version: all metadata and bytes then come from one inode, consistently."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ObjectNotFoundError(f"{self.url}/{key} does not exist", key) from None
        except OSError as exc:
            raise ObjectStoreError(f"cannot open {self.url}/{key}: {exc}", key) from exc
        try:
            if not _is_regular(fd):
                raise ObjectNotFoundError(f"{self.url}/{key} does not exist", key)
            yield fd
        except OSError as exc:
            raise ObjectStoreError(f"cannot read {self.url}/{key}: {exc}", key) from exc
        finally:
            os.close(fd)


def _is_valid_dir(dir_part: str) -> bool:
    try:
        validate_key(dir_part)
    except InvalidArgumentError:
        return False
    return True


def _is_regular(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


def _etag(st: os.stat_result, put_id: str | None) -> str:
    etag = f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"
    if put_id is not None:
        etag += "-" + hashlib.blake2b(put_id.encode(), digest_size=4).hexdigest()
    return etag


def _meta_from_fd(key: str, fd: int) -> ObjectMeta:
    st = os.fstat(fd)
    try:
        put_id: str | None = os.getxattr(fd, _PUT_ID_XATTR).decode()
    except OSError as exc:
        if exc.errno not in _NO_XATTR:
            raise
        put_id = None
    modified = datetime.fromtimestamp(st.st_mtime_ns / 1e9, UTC)
    return ObjectMeta(key, st.st_size, modified, _etag(st, put_id), put_id)


def _write_temp(tmp: Path, data: bytes, put_id: str) -> str:
    """Write, tag and fsync the temp file; return the etag it will keep after being published."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        tagged: str | None = put_id
        try:
            os.setxattr(fd, _PUT_ID_XATTR, put_id.encode())
        except OSError as exc:  # best effort: the filesystem may not support user xattrs
            if exc.errno not in _NO_XATTR:
                raise
            tagged = None
        now = time.time_ns()  # noqa: TID251 - a file's mtime is the filesystem's real time
        os.utime(fd, ns=(now, now))  # after the last write, which would bump mtime again
        os.fsync(fd)
        return _etag(os.fstat(fd), tagged)
    finally:
        os.close(fd)


def _pread_all(fd: int, offset: int, length: int) -> bytes:
    chunks: list[bytes] = []
    while length > 0:
        chunk = os.pread(fd, min(length, _READ_CHUNK), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(chunks)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def missing_root(store: ObjectStore) -> Path | None:
    """The root directory of ``store`` if it is a local store whose directory does not exist (seen
    through a request meter too: the admin handle meters every operation)."""
    while isinstance(store, MeteredStore):
        store = store.inner
    if isinstance(store, LocalStore) and not store.root.is_dir():
        return store.root
    return None


def db_not_found(store: ObjectStore, message: str) -> DbNotFoundError:
    """The error of no database found in ``store``: :class:`DbNotFoundError` with ``message``, or,
    when ``store`` is a local store whose directory does not exist (the likelier typo),
    :class:`StoreRootNotFoundError` (a :class:`StoreNotFoundError` too) naming the directory."""
    root = missing_root(store)
    if root is None:
        return DbNotFoundError(message)
    return StoreRootNotFoundError(
        f"{message} The store's directory {root} does not exist: nothing was read or created. Check "
        "the store URL ($SLATE_OPS_STORE, the CLI's --store, a fleet config's store_url)"
    )
