"""Group 2, keys and values: wrong types, empty keys, malformed ``hex:`` on the command line, and keys
outside a shard's range."""

from __future__ import annotations

from slate_ops.engine import WriteBatch
from slate_ops.errors import InvalidArgumentError, OutOfRangeError
from tests.reliability.bad_inputs.actions import db, reader
from tests.reliability.bad_inputs.catalogue import BYTES_FIX, EMPTY_FIX, HEX_FIX, case, cli
from tests.reliability.bad_inputs.states import build, shard_db, with_open_db, with_open_reader

group = "keys and values"
for name, call, fix in [
    ("Db.put str key", lambda env: db(env).put("k", b"v"), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.put int key", lambda env: db(env).put(7, b"v"), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.put empty key", lambda env: db(env).put(b"", b"v"), EMPTY_FIX),
    ("Db.put None value", lambda env: db(env).put(b"k", None), "delete()"),  # type: ignore[arg-type]
    ("Db.put str value", lambda env: db(env).put(b"k", "v"), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.delete str key", lambda env: db(env).delete("k"), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.delete empty key", lambda env: db(env).delete(b""), EMPTY_FIX),
    ("Db.get str key", lambda env: db(env).get("k"), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.get None key", lambda env: db(env).get(None), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.get empty key", lambda env: db(env).get(b""), EMPTY_FIX),
    ("Db.scan str bound", lambda env: list(db(env).scan("a")), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.scan empty bound", lambda env: list(db(env).scan(b"", b"k05")), EMPTY_FIX),
    ("Db.scan_prefix empty prefix", lambda env: list(db(env).scan_prefix(b"")), EMPTY_FIX),
    ("Db.scan_prefix str prefix", lambda env: list(db(env).scan_prefix("k")), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.write a list", lambda env: db(env).write([(b"k", b"v")]), "WriteBatch()"),  # type: ignore[arg-type]
    ("Db.write None", lambda env: db(env).write(None), "WriteBatch()"),  # type: ignore[arg-type]
    ("WriteBatch.put str key", lambda env: WriteBatch().put("k", b"v"), BYTES_FIX),  # type: ignore[arg-type]
    ("WriteBatch.put empty key", lambda env: WriteBatch().put(b"", b"v"), EMPTY_FIX),
    ("WriteBatch.put int value", lambda env: WriteBatch().put(b"k", 5), BYTES_FIX),  # type: ignore[arg-type]
    ("WriteBatch.delete int key", lambda env: WriteBatch().delete(3), BYTES_FIX),  # type: ignore[arg-type]
]:
    case(group, name, with_open_db, call, InvalidArgumentError, fix)
for name, call, fix in [
    ("DbReader.get str key", lambda env: reader(env).get("k"), BYTES_FIX),  # type: ignore[arg-type]
    ("DbReader.get empty key", lambda env: reader(env).get(b""), EMPTY_FIX),
    ("DbReader.scan float bound", lambda env: list(reader(env).scan(1.5)), BYTES_FIX),  # type: ignore[arg-type]
    ("DbReader.scan_prefix empty", lambda env: list(reader(env).scan_prefix(b"")), EMPTY_FIX),
]:
    case(group, name, with_open_reader, call, InvalidArgumentError, fix)
for name, argv, fix in [
    ("CLI put key odd hex", ("put", "hex:0", "v"), HEX_FIX),
    ("CLI put key non-hex", ("put", "hex:zz", "v"), HEX_FIX),
    ("CLI put value bad hex", ("put", "k", "hex:0g"), HEX_FIX),
    ("CLI get bad hex", ("get", "hex:abc"), HEX_FIX),
    ("CLI delete bad hex", ("delete", "hex:xyz1"), HEX_FIX),
    ("CLI scan --from bad hex", ("scan", "--from", "hex:1"), HEX_FIX),
    ("CLI scan --prefix hex with space", ("scan", "--prefix", "hex:00 ff"), HEX_FIX),
    ("CLI split --at bad hex", ("split", "--at", "hex:q", "--into", "a", "--into", "b"), HEX_FIX),
    ("CLI put empty key", ("put", "", "v"), "empty key"),
    ("CLI put hex: key (empty)", ("put", "hex:", "v"), "empty key"),
    ("CLI get empty key", ("get", ""), "empty key"),
    ("CLI delete hex: key (empty)", ("delete", "hex:"), "empty key"),
    ("CLI scan --from empty", ("scan", "--from", ""), "empty key"),
    ("CLI scan --prefix empty", ("scan", "--prefix", "hex:"), "empty key"),
    ("CLI split --at empty", ("split", "--at", "", "--into", "a", "--into", "b"), "empty key"),
]:
    case(group, name, build, cli("--path", "db", *argv), 2, fix)


case(
    group,
    "Db.put outside the shard's range",
    shard_db,
    lambda env: db(env).put(b"k09", b"x"),
    OutOfRangeError,
    "{location}",
    "shard whose range holds it",
)
case(
    group,
    "Db.get outside the shard's range",
    shard_db,
    lambda env: db(env).get(b"k09"),
    OutOfRangeError,
    "{location}",
    "shard whose range holds it",
)
case(
    group,
    "WriteBatch partly outside the shard's range",
    shard_db,
    lambda env: db(env).write(WriteBatch().put(b"k01", b"x").put(b"k07", b"y")),
    OutOfRangeError,
    "{location}",
    "nothing was written",
)
