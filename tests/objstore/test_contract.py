"""The object-store contract, run against memory, local and S3 (moto) alike."""

from __future__ import annotations

import os
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from slate_ops.errors import (
    InvalidArgumentError,
    ObjectNotFoundError,
    ObjectStoreError,
    PreconditionFailedError,
)
from slate_ops.objstore import LocalStore, ObjectStore, PutMode, S3Store, open_store

DATA = bytes(range(256)) * 4  # 1024 bytes, every offset distinguishable


def keys_of(store: ObjectStore, prefix: str = "", start_after: str | None = None) -> list[str]:
    return [m.key for m in store.list(prefix, start_after)]


def supports_put_id(store: ObjectStore) -> bool:
    """Local stores keep put ids in an xattr, which not every filesystem supports."""
    if not isinstance(store, LocalStore):
        return True
    store.root.mkdir(parents=True, exist_ok=True)  # a store's root appears with its first write
    probe = store.root / "xattr-probe"
    probe.write_bytes(b"")
    try:
        os.setxattr(probe, "user.slate_ops.probe", b"1")
        return True
    except OSError:
        return False
    finally:
        probe.unlink()


def test_store_implements_protocol(any_store: ObjectStore) -> None:
    assert isinstance(any_store, ObjectStore)
    assert "://" in any_store.url


def test_get_whole_object(any_store: ObjectStore) -> None:
    put = any_store.put("a/b/obj", DATA)
    got = any_store.get("a/b/obj")
    assert got.data == DATA
    assert got.meta.key == "a/b/obj"
    assert got.meta.size == len(DATA)
    assert got.meta.etag == put.etag
    assert isinstance(got.meta.last_modified, datetime)
    assert got.meta.last_modified.tzinfo is not None


@pytest.mark.parametrize(
    ("byte_range", "expected"),
    [
        ((0, 1), DATA[0:1]),
        ((10, 20), DATA[10:20]),
        ((1000, 1024), DATA[1000:1024]),
        ((1000, 5000), DATA[1000:]),  # clipped at the end
        ((1024, 2000), b""),  # starts at the end
        ((3000, 4000), b""),  # starts past the end
        ((7, 7), b""),  # empty
        ((0, 1024), DATA),
    ],
)
def test_get_range(any_store: ObjectStore, byte_range: tuple[int, int], expected: bytes) -> None:
    any_store.put("obj", DATA)
    got = any_store.get("obj", byte_range)
    assert got.data == expected
    assert got.meta.size == len(DATA)  # the object's size, not the range's


def test_get_range_of_empty_object(any_store: ObjectStore) -> None:
    any_store.put("empty", b"")
    assert any_store.get("empty").data == b""
    assert any_store.get("empty", (0, 10)).data == b""
    assert any_store.head("empty").size == 0


@pytest.mark.parametrize("byte_range", [(-1, 3), (5, 4)])
def test_invalid_range_refused(any_store: ObjectStore, byte_range: tuple[int, int]) -> None:
    any_store.put("obj", DATA)
    with pytest.raises(InvalidArgumentError):
        any_store.get("obj", byte_range)


def test_head_get_list_agree(any_store: ObjectStore) -> None:
    put = any_store.put("dir/x", b"hello")
    head = any_store.head("dir/x")
    got = any_store.get("dir/x")
    (listed,) = any_store.list("dir/")
    assert head.key == got.meta.key == listed.key == "dir/x"
    assert head.size == got.meta.size == listed.size == 5
    assert head.etag == got.meta.etag == listed.etag == put.etag
    if supports_put_id(any_store):
        assert head.put_id == got.meta.put_id == put.put_id


def test_put_id_round_trips(any_store: ObjectStore) -> None:
    if not supports_put_id(any_store):
        pytest.skip("this filesystem has no user xattrs")
    put_id = uuid.uuid4().hex
    result = any_store.put("k", b"v", put_id=put_id)
    assert result.put_id == put_id
    assert any_store.head("k").put_id == put_id
    generated = any_store.put("k", b"w")
    assert generated.put_id and generated.put_id != put_id
    assert any_store.head("k").put_id == generated.put_id


def test_overwrite_replaces(any_store: ObjectStore) -> None:
    any_store.put("k", b"one")
    any_store.put("k", b"two", PutMode.overwrite())
    assert any_store.get("k").data == b"two"


def test_etag_changes_on_each_write(any_store: ObjectStore) -> None:
    etags = [any_store.put("k", f"v{i}".encode()).etag for i in range(5)]
    assert len(set(etags)) == 5
    assert any_store.head("k").etag == etags[-1]


def test_etag_changes_on_rewrite_of_same_bytes(any_store: ObjectStore) -> None:
    """Memory and local etags are per write; S3's are content hashes, so only there may they repeat."""
    if isinstance(any_store, S3Store):
        pytest.skip("S3 etags are the content's MD5: the same bytes give the same etag")
    first = any_store.put("k", b"same").etag
    second = any_store.put("k", b"same").etag
    assert first != second


def test_create_if_absent(any_store: ObjectStore) -> None:
    won = any_store.put("k", b"winner", PutMode.create())
    with pytest.raises(PreconditionFailedError) as excinfo:
        any_store.put("k", b"loser", PutMode.create())
    assert excinfo.value.key == "k"
    got = any_store.get("k")
    assert got.data == b"winner"
    assert got.meta.etag == won.etag


def test_create_after_delete(any_store: ObjectStore) -> None:
    any_store.put("k", b"1", PutMode.create())
    any_store.delete("k")
    any_store.put("k", b"2", PutMode.create())
    assert any_store.get("k").data == b"2"


def test_if_match(any_store: ObjectStore) -> None:
    first = any_store.put("k", b"v1")
    second = any_store.put("k", b"v2", PutMode.if_match(first.etag))
    assert any_store.get("k").data == b"v2"
    with pytest.raises(PreconditionFailedError):
        any_store.put("k", b"stale", PutMode.if_match(first.etag))
    got = any_store.get("k")
    assert got.data == b"v2"
    assert got.meta.etag == second.etag
    any_store.put("k", b"v3", PutMode.if_match(second.etag))
    assert any_store.get("k").data == b"v3"


def test_if_match_missing_key(any_store: ObjectStore) -> None:
    etag = any_store.put("other", b"x").etag
    with pytest.raises(PreconditionFailedError):
        any_store.put("missing", b"y", PutMode.if_match(etag))
    with pytest.raises(ObjectNotFoundError):
        any_store.head("missing")


def test_list_prefix_and_order(any_store: ObjectStore) -> None:
    keys = ["a", "a-c", "a/b", "a/b/c", "a/bb", "ab", "b/x", "b0", "z/y/x"]
    # "a" and "a/b" cannot both be files on a filesystem; rename the clashing ones there.
    if isinstance(any_store, LocalStore):
        keys = ["a-c", "a/b/c", "a/b0", "a/bb", "ab", "b/x", "b0", "z/y/x"]
    for key in reversed(keys):
        any_store.put(key, key.encode())
    assert keys_of(any_store) == sorted(keys)
    for prefix in ["a", "a/", "a/b", "a/b/", "b", "z/y/", "zz", "nothing/here", "a/b/c"]:
        assert keys_of(any_store, prefix) == [k for k in sorted(keys) if k.startswith(prefix)], prefix


def test_list_start_after(any_store: ObjectStore) -> None:
    keys = ["d1/a", "d1/b", "d1/c/x", "d2/a", "e"]
    for key in keys:
        any_store.put(key, b"")
    assert keys_of(any_store, start_after="d1/b") == ["d1/c/x", "d2/a", "e"]
    assert keys_of(any_store, start_after="d1/a0") == ["d1/b", "d1/c/x", "d2/a", "e"]
    assert keys_of(any_store, start_after="d1/") == keys
    assert keys_of(any_store, start_after="d1/zzz") == ["d2/a", "e"]
    assert keys_of(any_store, "d1/", start_after="d1/b") == ["d1/c/x"]
    assert keys_of(any_store, start_after="e") == []
    assert keys_of(any_store, start_after="") == keys


def test_list_reports_sizes_and_etags(any_store: ObjectStore) -> None:
    etags = {key: any_store.put(key, key.encode() * 3).etag for key in ["p/1", "p/22", "p/333"]}
    listed = {m.key: m for m in any_store.list("p/")}
    assert {k: m.etag for k, m in listed.items()} == etags
    assert {k: m.size for k, m in listed.items()} == {"p/1": 9, "p/22": 12, "p/333": 15}


def test_list_many_keys(any_store: ObjectStore) -> None:
    keys = [f"many/{i:04d}" for i in range(60)]
    for key in keys:
        any_store.put(key, b"x")
    assert keys_of(any_store, "many/") == keys
    assert keys_of(any_store, "many/", start_after="many/0039") == keys[40:]


def test_delete_is_idempotent(any_store: ObjectStore) -> None:
    any_store.put("k", b"v")
    any_store.delete("k")
    any_store.delete("k")
    any_store.delete("never/existed")
    with pytest.raises(ObjectNotFoundError):
        any_store.get("k")
    assert keys_of(any_store) == []


def test_not_found_errors(any_store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFoundError) as excinfo:
        any_store.get("missing/key")
    assert excinfo.value.key == "missing/key"
    with pytest.raises(ObjectNotFoundError):
        any_store.get("missing/key", (0, 10))
    with pytest.raises(ObjectNotFoundError):
        any_store.get("missing/key", (3, 3))
    with pytest.raises(ObjectNotFoundError):
        any_store.head("missing/key")


@pytest.mark.parametrize("key", ["", "/abs", "a//b", "a/./b", "../up", "a/..", "trailing/"])
def test_invalid_keys_refused(any_store: ObjectStore, key: str) -> None:
    with pytest.raises(InvalidArgumentError):
        any_store.put(key, b"x")
    with pytest.raises(InvalidArgumentError):
        any_store.get(key)
    with pytest.raises(InvalidArgumentError):
        any_store.head(key)
    with pytest.raises(InvalidArgumentError):
        any_store.delete(key)


def test_binary_and_large_object(any_store: ObjectStore) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    any_store.put("big", data)
    assert any_store.get("big").data == data
    assert any_store.get("big", (2_000_000, 2_000_100)).data == data[2_000_000:2_000_100]


# --- local store specifics ----------------------------------------------------------------------


def test_local_hides_its_own_files(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("x/a", b"1", PutMode.create())
    store.put("x/a", b"2", PutMode.if_match(store.head("x/a").etag))
    (tmp_path / "x" / ".tmp-orphan").write_bytes(b"left by a crash")
    assert (tmp_path / ".locks").is_dir()
    assert keys_of(store) == ["x/a"]
    assert keys_of(store, ".") == []


@pytest.mark.parametrize("key", [".locks/00", ".tmp-x", "a/.tmp-y"])
def test_local_refuses_reserved_names(tmp_path: Path, key: str) -> None:
    with pytest.raises(InvalidArgumentError):
        LocalStore(tmp_path).put(key, b"x")


def test_local_key_cannot_be_object_and_directory(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("a", b"file")
    with pytest.raises(ObjectStoreError):
        store.put("a/b", b"under a file")
    store.put("d/e", b"x")
    with pytest.raises(ObjectStoreError):
        store.put("d", b"over a directory")
    with pytest.raises(ObjectNotFoundError):
        store.get("d")
    assert keys_of(store) == ["a", "d/e"]


def test_local_survives_reopen_and_inode_reuse(tmp_path: Path) -> None:
    """Rapid rewrites on a filesystem that recycles inodes must still give distinct etags."""
    store = LocalStore(tmp_path)
    etags = [store.put("k", b"same size").etag for _ in range(50)]  # ext4 cycles ~3 inode numbers
    assert len(set(etags)) == len(etags)
    assert LocalStore(str(tmp_path)).head("k").etag == etags[-1]


def test_local_url(tmp_path: Path) -> None:
    assert LocalStore(tmp_path / "r").url == (tmp_path / "r").as_uri()


def test_local_open_and_read_create_nothing(tmp_path: Path) -> None:
    """Opening a store and reading it (even a delete of a missing key) leave the disk untouched; the
    root and .locks/ appear with the first write (docs/cli.md "Safety")."""
    root = tmp_path / "not" / "yet"
    store = open_store(root.as_uri())
    assert keys_of(store) == [] and keys_of(store, "a/") == []
    with pytest.raises(ObjectNotFoundError):
        store.get("a/b")
    with pytest.raises(ObjectNotFoundError):
        store.head("a/b")
    store.delete("a/b")
    assert not (tmp_path / "not").exists()
    store.put("a/b", b"1", PutMode.create())
    assert (root / ".locks").is_dir() and keys_of(store) == ["a/b"]
