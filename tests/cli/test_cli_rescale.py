"""The rescaling commands (split, merge, suggest-split-keys, flush) of the slate-ops CLI, through ``main``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slate_ops import Db, DbReader
from slate_ops.cli import main
from slate_ops.objstore import ObjectStore, open_store
from tests.support.engine import simulate_crash
from tests.support.stores import snapshot

MODEL = {b"k%02d" % i: b"v%d" % i for i in range(40)}


@pytest.fixture
def model_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ObjectStore:
    url = (tmp_path / "store").as_uri()
    monkeypatch.setenv("SLATE_OPS_STORE", url)
    store = open_store(url)
    with Db.open("db", store) as db:
        for key, value in MODEL.items():
            db.put(key, value)
        db.flush_memtable()
    return store


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else out), err


def scan(store: ObjectStore, path: str) -> dict[bytes, bytes]:
    with DbReader.open(path, store) as reader:
        return dict(reader.scan())


def test_split_then_merge(model_store: ObjectStore, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = cli(
        capsys, "--path", "db", "split", "--at", "k10", "--at", "hex:6b3330", "--into", "a", "--into", "b",
        "--into", "c",
    )  # fmt: skip
    assert code == 0 and report["created"] and report["sst_bytes_copied"] == 0
    assert [d["key_range"] for d in report["databases"]] == [
        {"start": None, "end": "k10"},
        {"start": "k10", "end": "k30"},
        {"start": "k30", "end": None},
    ]
    assert scan(model_store, "b") == {k: v for k, v in MODEL.items() if b"k10" <= k < b"k30"}

    code, report, _ = cli(capsys, "--path", "all", "merge", "--source", "a", "--source", "b", "--source", "c")
    assert code == 0 and report["databases"][0]["key_range"] == {"start": None, "end": None}
    assert scan(model_store, "all") == MODEL

    code, _, err = cli(capsys, "--path", "a", "put", "k20", "x")
    assert code != 0 and "outside" in err and "k20" in err


def test_suggest_split_keys_and_flush(model_store: ObjectStore, capsys: pytest.CaptureFixture[str]) -> None:
    code, suggestion, _ = cli(capsys, "--path", "db", "suggest-split-keys", "-n", "2")
    assert code == 0 and suggestion["n"] == 2 and len(suggestion["split_keys"]) <= 1

    with Db.open("db", model_store) as db:
        db.put(b"k99", b"wal-only")
        db.flush()
        simulate_crash(db)
    before = snapshot(model_store)
    code, _, err = cli(capsys, "--path", "db", "split", "--at", "k20", "--into", "a", "--into", "b")
    assert code != 0 and "flush" in err and "Traceback" not in err
    assert snapshot(model_store) == before
    code, flushed, _ = cli(capsys, "--path", "db", "flush")
    assert code == 0 and flushed["l0_views"] >= 2
    code, _, _ = cli(capsys, "--path", "db", "split", "--at", "k20", "--into", "a", "--into", "b")
    assert code == 0 and scan(model_store, "b")[b"k99"] == b"wal-only"


def test_suggest_split_keys_says_why_it_found_fewer_than_asked(
    model_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before issue 20 a short but non-empty answer came without a reason."""
    with Db.open("two", model_store) as db:  # two L0 SSTs of one block each: one block boundary between them
        for prefix in (b"a", b"m"):
            for i in range(20):
                db.put(prefix + b"%02d" % i, b"x" * 20)
            db.flush_memtable()
    code, suggestion, _ = cli(capsys, "--path", "two", "suggest-split-keys", "-n", "3")
    assert code == 0 and suggestion["split_keys"] == ["m00"]
    reason = suggestion["reason"]
    assert "1 split key instead of the 2 that -n 3 asks for" in reason
    assert "only 2 blocks" in reason and "at most 1 split key is possible" in reason
    code = main(["--format", "table", "--path", "two", "suggest-split-keys", "-n", "3"])
    text = capsys.readouterr().out
    assert code == 0 and any(line.startswith("reason") and "at most 1" in line for line in text.splitlines())
    code, enough, _ = cli(capsys, "--path", "two", "suggest-split-keys", "-n", "2")
    assert code == 0 and enough["split_keys"] == ["m00"] and "reason" not in enough


def test_overlapping_merge_fails_naming_both(
    model_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    with Db.open("other", model_store) as db:
        db.put(b"k05", b"clash")
        db.flush_memtable()
    before = snapshot(model_store)
    code, _, err = cli(capsys, "--path", "m", "merge", "--source", "db", "--source", "other")
    assert code != 0 and "'db'" in err and "'other'" in err and "overlap" in err
    assert snapshot(model_store) == before


def test_split_needs_arguments(model_store: ObjectStore, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--path", "db", "split", "--into", "a"])
    assert exited.value.code == 2
    code, _, err = cli(capsys, "--path", "db", "split", "--at", "k10", "--into", "a")
    assert code != 0 and "one more path than keys" in err


def test_split_and_merge_flush_wal(model_store: ObjectStore, capsys: pytest.CaptureFixture[str]) -> None:
    """``--flush-wal`` (both engines' flag): the WAL-only writes refused above reach L0 first."""
    with Db.open("db", model_store) as db:
        db.put(b"k99", b"wal-only")
        db.flush()
        simulate_crash(db)
    argv = ("--path", "db", "split", "--at", "k20", "--into", "a", "--into", "b")
    assert cli(capsys, *argv)[0] == 1
    code, report, err = cli(capsys, *argv, "--flush-wal")
    assert code == 0, err
    assert scan(model_store, "b")[b"k99"] == b"wal-only" and [d["path"] for d in report["databases"]] == [
        "a",
        "b",
    ]
    with Db.open("b", model_store) as db:
        db.put(b"k98", b"wal-only")
        db.flush()
        simulate_crash(db)
    assert cli(capsys, "--path", "m", "merge", "--source", "a", "--source", "b")[0] == 1
    code, _, err = cli(capsys, "--path", "m", "merge", "--source", "a", "--source", "b", "--flush-wal")
    assert code == 0, err
    assert scan(model_store, "m") == {**MODEL, b"k99": b"wal-only", b"k98": b"wal-only"}
