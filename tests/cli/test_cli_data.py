"""The data commands (put, get, delete, scan) of the slate-ops CLI, through ``slate_ops.cli.main``."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from slate_ops import CheckpointScope, Db, DbOptions, WriteBatch
from slate_ops.cli import main
from slate_ops.cli.args import parse_bytes
from slate_ops.cli.output import print_json_lines
from slate_ops.errors import FencedError
from slate_ops.keytext import render_bytes
from slate_ops.objstore import ObjectStore


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    """Run ``slate-ops --path db ARGV``; the exit code, the JSON lines printed and stderr."""
    code = main(["--path", "db", *argv])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def load(store: ObjectStore, rows: dict[bytes, bytes]) -> None:
    with Db.open("db", store) as db:
        batch = WriteBatch()
        for key, value in rows.items():
            batch.put(key, value)
        db.write(batch)
        db.flush()


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"plain", "plain"),
        ("héllo wörld ✓".encode(), "héllo wörld ✓"),
        (b"", ""),
        (b"\x00\xff", "hex:00ff"),
        (b"hex:abc", "hex:6865783a616263"),  # text that looks like hex is rendered as hex
        (b"\xc3", "hex:c3"),  # truncated UTF-8
    ],
)
def test_render_and_parse_round_trip(raw: bytes, text: str) -> None:
    assert render_bytes(raw) == text
    assert parse_bytes(text) == raw


def test_text_round_trip(cli_store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "put", "--create", "greeting", "héllo wörld")[:2] == (
        0,
        [{"key": "greeting", "value": "héllo wörld"}],
    )
    assert cli(capsys, "get", "greeting")[:2] == (0, [{"key": "greeting", "value": "héllo wörld"}])
    assert cli(capsys, "delete", "greeting")[:2] == (0, [{"key": "greeting", "value": None}])
    # A missing key is not an error.
    assert cli(capsys, "get", "greeting")[:2] == (0, [{"key": "greeting", "value": None}])


def test_hex_round_trip(
    cli_store_url: str, cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "put", "--create", "hex:00FF", "hex:deadbeef")[:2] == (
        0,
        [{"key": "hex:00ff", "value": "hex:deadbeef"}],
    )
    assert cli(capsys, "get", "hex:00ff")[1] == [{"key": "hex:00ff", "value": "hex:deadbeef"}]
    assert cli(capsys, "put", "hex:6865783a31", "hex:")[1] == [{"key": "hex:6865783a31", "value": ""}]
    with Db.open("db", cli_store) as db:
        assert db.get(b"\x00\xff") == b"\xde\xad\xbe\xef"
        assert db.get(b"hex:1") == b""
        db.put(b"bin", b"\x80\x81")
        db.flush()
    # Every scanned row, fed back as input, names the same key and value.
    _, rows, _ = cli(capsys, "scan")
    assert len(rows) == 3
    for line in rows:
        assert cli(capsys, "get", line["key"])[1] == [line]
    assert {"key": "bin", "value": "hex:8081"} in rows


def test_prefix_and_range_scans(cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]) -> None:
    load(cli_store, {k.encode(): k.upper().encode() for k in ("a1", "a2", "b1", "b2", "c1")})

    def keys(*argv: str) -> list[str]:
        code, rows, err = cli(capsys, "scan", *argv)
        assert code == 0, err
        return [r["key"] for r in rows]

    assert keys() == ["a1", "a2", "b1", "b2", "c1"]
    assert keys("--prefix", "a") == ["a1", "a2"]
    assert keys("--prefix", "hex:62") == ["b1", "b2"]
    assert keys("--prefix", "z") == []
    assert keys("--from", "a2", "--to", "c1") == ["a2", "b1", "b2"]  # [from, to)
    assert keys("--from", "b") == ["b1", "b2", "c1"]
    assert keys("--to", "b") == ["a1", "a2"]
    assert keys("--max-keys", "2") == ["a1", "a2"]
    assert keys("--prefix", "b", "--max-keys", "1") == ["b1"]
    assert cli(capsys, "scan", "--prefix", "c")[1] == [{"key": "c1", "value": "C1"}]


def test_scan_at_a_checkpoint_sees_the_state_then(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    with Db.open("db", cli_store) as db:
        db.put(b"k1", b"old")
        checkpoint = db.create_checkpoint(CheckpointScope.ALL)
        db.put(b"k1", b"new")
        db.put(b"k2", b"added")
        db.flush()
        code, rows, err = cli(capsys, "scan", "--checkpoint", str(checkpoint.id))
        assert code == 0, err
        assert rows == [{"key": "k1", "value": "old"}]
        assert cli(capsys, "scan")[1] == [{"key": "k1", "value": "new"}, {"key": "k2", "value": "added"}]


def test_reads_do_not_fence_the_writer_but_writes_do(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    db = Db.open("db", cli_store, options=DbOptions(await_durable=True))
    try:
        db.put(b"a", b"1")
        assert cli(capsys, "scan")[:2] == (0, [{"key": "a", "value": "1"}])
        assert cli(capsys, "get", "a")[:2] == (0, [{"key": "a", "value": "1"}])
        db.put(b"b", b"2")  # still the writer: durable writes and a memtable flush commit
        db.flush_memtable()
        assert db.get(b"b") == b"2"
        assert cli(capsys, "put", "c", "3")[0] == 0  # a new writer: it fences this one
        with pytest.raises(FencedError):
            db.put(b"d", b"4")
            db.flush_memtable()
    finally:
        with contextlib.suppress(FencedError):
            db.close()
    assert cli(capsys, "scan")[1] == [
        {"key": "a", "value": "1"},
        {"key": "b", "value": "2"},
        {"key": "c", "value": "3"},
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["put", "hex:0", "v"],  # odd number of digits
        ["put", "k", "hex:zz"],
        ["get", "hex:00 ff"],
        ["put", "k"],  # no value
        ["delete"],
        ["scan", "--prefix", "a", "--from", "b"],
        ["scan", "--prefix", "a", "--to", "b"],
        ["scan", "--max-keys", "0"],
        ["scan", "--checkpoint", "not-a-uuid"],
        ["scan", "--from", "hex:xy"],
    ],
)
def test_usage_errors_exit_2(cli_store_url: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["--path", "db", *argv])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert "usage: slate-ops" in err and "invalid choice" not in err  # the data command was parsed


def test_operation_errors_exit_1(cli_store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["get", "k"], ["scan"]):
        code, rows, err = cli(capsys, *argv)
        assert code == 1 and rows == [] and err.count("\n") == 1 and err.startswith("slate-ops: error:")


def test_print_json_lines_closes_the_generator() -> None:
    closed = []

    def rows() -> Iterator[dict[str, Any]]:
        try:
            yield {"key": "a", "value": None}
            yield {"key": "b", "value": "x"}
        finally:
            closed.append(True)

    out = io.StringIO()
    assert print_json_lines(rows(), out) == 2
    assert out.getvalue() == '{"key": "a", "value": null}\n{"key": "b", "value": "x"}\n' and closed
