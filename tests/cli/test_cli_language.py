"""One language across the slate-ops CLI (docs/cli.md "Output conventions"): keys as text or hex:,
times in ISO 8601 UTC, sizes and durations for people in tables, errors in the CLI's words."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from slate_ops import Db, admin
from slate_ops.cli import main
from slate_ops.cli.hints import HINTS, cli_message
from slate_ops.cli.output import (
    jsonable,
    render,
    render_duration,
    render_size,
    render_time,
    with_iso_times,
)
from slate_ops.keytext import parse_bytes, render_bytes
from slate_ops.manifest.model import KeyRange
from slate_ops.objstore import ObjectStore
from tests.support.engine import simulate_crash


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """Run ``slate-ops ARGV``: exit code, parsed JSON (raw text with --format or JSON lines), stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    if code == 0 and "--format" not in argv and out.strip():
        try:
            return code, json.loads(out), err
        except json.JSONDecodeError:
            return code, [json.loads(line) for line in out.splitlines()], err
    return code, out, err


def load(store: ObjectStore, path: str, rows: dict[bytes, bytes]) -> None:
    with Db.open(path, store) as db:
        for key, value in rows.items():
            db.put(key, value)
        db.flush_memtable()


# --- keys -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"order:2", "order:2"),
        (b"with space", "with space"),
        ("naïve".encode(), "naïve"),
        (b"a\nb", "hex:610a62"),  # control characters are not printable text
        (b"tab\there", "hex:7461620968657265"),
        (b"k059\x00", "hex:6b30353900"),
        (b"\x7f", "hex:7f"),
        (b"hex:1", "hex:6865783a31"),
    ],
)
def test_keys_render_as_printable_text_or_hex(raw: bytes, text: str) -> None:
    assert render_bytes(raw) == text
    assert parse_bytes(text) == raw


def test_key_ranges_in_messages_use_the_same_form() -> None:
    assert str(KeyRange(b"k13", b"k27")) == "[k13, k27)"
    assert str(KeyRange(None, b"k059\x00")) == "[-inf, hex:6b30353900)"
    assert str(KeyRange(b"\xff", None)) == "[hex:ff, +inf)"


def test_read_manifest_shape_and_scan_print_keys_alike(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    load(cli_store, "db", {b"a\nb": b"line\nbreak", b"k1": b"v1", b"\xff": b"x"})
    _, manifest, _ = cli(capsys, "--path", "db", "read-manifest")
    (sst,) = manifest["manifest"]["ssts"]
    assert (sst["info"]["first_key"], sst["info"]["last_key"]) == ("hex:610a62", "hex:ff")
    _, shape, _ = cli(capsys, "--path", "db", "shape")
    assert (shape["l0"][0]["first_key"], shape["l0"][0]["last_key"]) == ("hex:610a62", "hex:ff")
    _, rows, _ = cli(capsys, "--path", "db", "scan")
    assert rows == [
        {"key": "hex:610a62", "value": "hex:6c696e650a627265616b"},
        {"key": "k1", "value": "v1"},
        {"key": "hex:ff", "value": "x"},
    ]
    # Each printed key is accepted back as input.
    _, got, _ = cli(capsys, "--path", "db", "get", "hex:610a62")
    assert got == {"key": "hex:610a62", "value": "hex:6c696e650a627265616b"}


def test_read_manifest_prints_view_ranges_as_keys(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    load(cli_store, "db", {b"k1": b"v", b"k5": b"v", b"k9": b"v"})
    admin.split("db", cli_store, [b"k5"], ["low", "high"])
    _, manifest, _ = cli(capsys, "--path", "high", "read-manifest")
    assert manifest["manifest"]["visible_range"] == {"start": "k5", "end": None}
    (view,) = manifest["manifest"]["l0"]
    assert view["visible_range"] == {"start": "k5", "end": "hex:6b3900"}  # [k5, k9 + NUL)


def test_errors_show_keys_as_the_cli_prints_them(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    load(cli_store, "db", {b"k1": b"v", b"k5": b"v", b"k9": b"v"})
    assert cli(capsys, "--path", "db", "split", "--at", "k5", "--into", "low", "--into", "high")[0] == 0
    code, _, err = cli(capsys, "--path", "low", "put", "order:2", "x")
    assert code == 1 and "key order:2 is outside" in err and "[-inf, k5)" in err and "b'" not in err
    code, _, err = cli(capsys, "--path", "high", "get", "hex:00")
    assert code == 1 and "key hex:00 is outside" in err and "[k5, +inf)" in err
    code, _, err = cli(
        capsys,
        "--path",
        "db",
        "split",
        "--at",
        "k7",
        "--at",
        "k3",
        "--into",
        "a",
        "--into",
        "b",
        "--into",
        "c",
    )
    assert code == 1 and "k7 >= k3" in err and "b'" not in err
    code, _, err = cli(capsys, "--path", "high", "split", "--at", "k1", "--into", "a", "--into", "b")
    assert code == 1 and "split key k1 is not strictly inside" in err and "[k5, +inf)" in err


# --- times ------------------------------------------------------------------------------------------


def test_every_unix_time_gets_an_iso_twin_and_durations_do_not() -> None:
    value = {
        "create_time_s": 1795270070,
        "expire_time_s": 0,  # stored 0: never expires
        "destroyed_at_s": None,
        "at_s": 1795270070.5,
        "due_period_start_s": 1795219200,
        "duration_s": 0.3837562399999115,
        "grace_s": 300,
        "nested": [{"create_time_s": 1795270070}],
    }
    out = with_iso_times(value)
    assert out["create_time"] == "2026-11-21T14:07:50Z"
    assert out["expire_time"] is None and out["destroyed_at"] is None
    assert out["at"] == "2026-11-21T14:07:50Z" and out["due_period_start"] == "2026-11-21T00:00:00Z"
    assert "duration" not in out and "grace" not in out
    assert out["nested"] == [{"create_time_s": 1795270070, "create_time": "2026-11-21T14:07:50Z"}]
    assert list(out)[:2] == ["create_time_s", "create_time"]  # the twin sits beside its field
    assert with_iso_times(out) == out  # idempotent
    assert with_iso_times({"create_time_s": 1, "create_time": "kept"})["create_time"] == "kept"


def test_render_time_is_iso_8601_utc() -> None:
    assert render_time(0.0) == "1970-01-01T00:00:00Z"
    east = datetime(2026, 11, 21, 16, 47, 50, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert render_time(east) == "2026-11-21T14:47:50Z"
    assert render_time(None) is None


def test_checkpoints_tags_destroy_and_manifests_print_iso_times(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(capsys, "--path", "db", "create-db")
    _, created, _ = cli(capsys, "--path", "db", "create-checkpoint", "-l", "1day")
    _, listed, _ = cli(capsys, "--path", "db", "list-checkpoints")
    (checkpoint,) = listed
    assert checkpoint["id"] == created["id"]
    assert checkpoint["create_time"] == render_time(checkpoint["create_time_s"])
    assert checkpoint["expire_time"] == render_time(checkpoint["expire_time_s"])
    _, table, _ = cli(capsys, "--path", "db", "list-checkpoints", "--format", "table")
    header = table.splitlines()[0].split()
    assert "create_time" in header and "create_time_s" not in header and "expire_time" in header
    assert checkpoint["create_time"] in table and str(checkpoint["create_time_s"]) not in table

    _, tag, _ = cli(capsys, "--path", "db", "create-tag", "-n", "v1")
    assert tag["create_time"] == render_time(tag["create_time_s"])
    _, tags, _ = cli(capsys, "--path", "db", "list-tags")
    assert tags[0]["create_time"] == tag["create_time"] and tags[0]["create_time_s"] == tag["create_time_s"]

    _, manifests, _ = cli(capsys, "--path", "db", "list-manifests")
    assert all(m["last_modified"].endswith("Z") and "." not in m["last_modified"] for m in manifests)

    _, destroyed, _ = cli(capsys, "--path", "db", "destroy", "--dry-run")
    assert destroyed["destroyed_at"] == render_time(destroyed["destroyed_at_s"])
    _, table, _ = cli(capsys, "--path", "db", "destroy", "--dry-run", "--format", "table")
    assert destroyed["destroyed_at"][:13] in table and "destroyed_at_s" not in table


# --- sizes and durations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "text"), [(0, "0 B"), (512, "512 B"), (1536, "1.5 KiB"), (3 * 1024**2, "3.0 MiB")]
)
def test_render_size(size: int, text: str) -> None:
    assert render_size(size) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.3837562399999115, "384ms"), (2.345, "2.35s"), (125, "2min 5s"), (90061, "1days 1h 1min 1s")],
)
def test_render_duration(seconds: float, text: str) -> None:
    assert render_duration(seconds) == text


def test_tables_are_for_people_and_json_keeps_numbers(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    value = jsonable({"duration_s": 0.3837562399999115, "bytes_read": 4096, "sst_bytes": 2256, "rows_in": 40})
    assert json.loads(render(value, "json")) == value
    table = render(value, "table")
    assert "384ms" in table and "4.0 KiB" in table and "2.2 KiB" in table and "40" in table
    assert "0.3837" not in table

    with Db.open("db", cli_store) as db:
        for round_ in range(4):
            db.put(b"k", b"v%d" % round_)
            db.flush_memtable()
    _, report, _ = cli(capsys, "--path", "db", "compact")
    assert isinstance(report["duration_s"], float) and isinstance(report["bytes_written"], int)
    _, table, _ = cli(capsys, "--path", "db", "describe", "--format", "table")
    assert any(line.split()[0] == "sst_bytes" and line.endswith(("B", "KiB")) for line in table.splitlines())
    _, table, _ = cli(capsys, "--path", "db", "shape", "--format", "table")
    assert " B " in table or "KiB" in table


# --- error wording ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "tag 'v1' of file:///s/db already exists (checkpoint c, manifest 3); delete it first or pass "
            "replace=True (--replace)",
            "tag 'v1' of file:///s/db already exists (checkpoint c, manifest 3); delete it first or pass "
            "--replace",
        ),
        (
            "a database already exists at file:///s/db; use it as it is with exist_ok=True "
            "(`slate-ops create-db --exist-ok`), or choose another path",
            "a database already exists at file:///s/db; use it as it is with `slate-ops create-db "
            "--exist-ok`, or choose another path",
        ),
        (
            "Flush its memtable first (Db.flush_memtable(), or `slate-ops --path src flush`, which fences "
            "the current writer) and retry",
            "Flush its memtable first (`slate-ops --path src flush`, which fences the current writer) and "
            "retry",
        ),
        ("flush it with Db.flush_memtable() first", "flush it with `slate-ops --path db flush` first"),
        ("nothing was deleted: pass dry_run=False to act", "nothing was deleted: pass --no-dry-run to act"),
        ("preview it with dry_run=True", "preview it with --dry-run"),
        ("pass exist_ok=True", "pass --exist-ok"),
        ("reserved for tags; use create_tag", "reserved for tags; use `slate-ops create-tag`"),
        ("no hint here", "no hint here"),
    ],
)
def test_cli_message_names_flags_and_commands(message: str, expected: str) -> None:
    translated = cli_message(message, "db")
    assert translated == expected
    assert not any(hint.python in translated for hint in HINTS)


def test_errors_reaching_the_cli_name_flags(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(capsys, "--path", "db", "create-db")
    code, _, err = cli(capsys, "--path", "db", "create-db")
    assert code == 1 and "`slate-ops create-db --exist-ok`" in err and "exist_ok" not in err
    cli(capsys, "--path", "db", "create-tag", "-n", "v1")
    code, _, err = cli(capsys, "--path", "db", "create-tag", "-n", "v1")
    assert code == 1 and "pass --replace" in err and "replace=True" not in err
    code, _, err = cli(capsys, "--path", "db", "create-checkpoint", "-n", "tag:x")
    assert code == 1 and "use `slate-ops create-tag`" in err and "create_tag" not in err

    with Db.open("db", cli_store) as db:
        db.put(b"k", b"wal only")
        db.flush()
        simulate_crash(db)
    code, _, err = cli(capsys, "--path", "db", "split", "--at", "k", "--into", "a", "--into", "b")
    assert code == 1 and "`slate-ops --path db flush`" in err and "Db.flush_memtable" not in err
