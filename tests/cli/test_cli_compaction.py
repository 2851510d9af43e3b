"""The compaction commands (compact, shape) of the slate-ops CLI, through ``slate_ops.cli.main``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slate_ops import Db, DbReader
from slate_ops.cli import main
from slate_ops.objstore import ObjectStore

KEYS = [f"k{i:02d}".encode() for i in range(10)]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """Run ``slate-ops --path db ARGV``: exit code, parsed JSON (raw text with --format), stderr."""
    code = main(["--path", "db", *argv])
    out, err = capsys.readouterr()
    if code == 0 and "--format" not in argv:
        return code, json.loads(out), err
    return code, out, err


def flush_rounds(store: ObjectStore, rounds: int, first: int = 0) -> None:
    """``rounds`` L0 SSTs, each rewriting every key with value ``v<round>``."""
    with Db.open("db", store) as db:
        for round_ in range(first, first + rounds):
            for key in KEYS:
                db.put(key, f"v{round_}".encode())
            db.flush_memtable()


def contents(store: ObjectStore) -> dict[bytes, bytes]:
    reader = DbReader.open("db", store)
    try:
        return dict(reader.scan())
    finally:
        reader.close()


def test_compact_merges_l0_into_one_sorted_run(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    flush_rounds(cli_store, 5)
    _, before, _ = cli(capsys, "shape")
    assert len(before["l0"]) == 5 and before["sorted_runs"] == []
    assert before["l0"][0] == {
        "id": before["l0"][0]["id"],
        "first_key": "k00",
        "last_key": "k09",
        "size_bytes": before["l0"][0]["size_bytes"],
        "num_entries": 10,
    }

    code, report, err = cli(capsys, "compact")
    assert code == 0, err
    assert (report["compacted"], report["kind"], report["executor"]) == (True, "l0", "local")
    assert sorted(report["input_ssts"]) == sorted(s["id"] for s in before["l0"])
    assert len(report["sources"]) == 5 and len(report["output_ssts"]) == 1
    assert (report["rows_in"], report["rows_out"], report["sorted_run_id"]) == (50, 10, 0)
    assert report["bytes_written"] > 0 and report["duration_s"] >= 0 and report["subcompactions"] >= 1

    _, after, _ = cli(capsys, "shape")
    assert after["manifest_id"] == report["manifest_id"] > before["manifest_id"]
    assert after["l0"] == []
    assert after["sorted_runs"] == [
        {
            "id": 0,
            "ssts": 1,
            "first_key": "k00",
            "last_key": "k09",
            "size_bytes": after["sorted_runs"][0]["size_bytes"],
            "num_entries": 10,
        }
    ]
    assert contents(cli_store) == {key: b"v4" for key in KEYS}  # the newest round won


def test_nothing_to_compact_then_full(cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]) -> None:
    flush_rounds(cli_store, 4)
    assert cli(capsys, "compact")[1]["kind"] == "l0"
    flush_rounds(cli_store, 2, first=4)  # 2 L0 SSTs + 1 sorted run: below min_sources

    code, idle, _ = cli(capsys, "compact")
    assert code == 0
    assert idle == {
        "compacted": False,
        "reason": "below the compaction thresholds: 2 L0 view(s) and 1 sorted run(s) "
        "(min_sources 4; --full merges everything)",
        "manifest_id": idle["manifest_id"],
        "l0_views": 2,
        "sorted_runs": 1,
        "requests": idle["requests"],
    }
    # finding nothing to do still read the manifest and claimed the compactor's epoch (a PUT)
    assert idle["requests"]["get"] >= 1 and idle["requests"]["put"] >= 1 and idle["requests"]["delete"] == 0

    code, full, _ = cli(capsys, "compact", "--full")
    assert code == 0
    assert (full["compacted"], full["kind"], len(full["input_ssts"]), full["rows_out"]) == (
        True,
        "full",
        3,
        10,
    )
    assert full["sources"][-1] == "sr:0"
    _, shape, _ = cli(capsys, "shape")
    assert shape["l0"] == [] and [r["id"] for r in shape["sorted_runs"]] == [0]
    assert contents(cli_store) == {key: b"v5" for key in KEYS}

    code, again, _ = cli(capsys, "compact", "--full")
    assert code == 0 and again["compacted"] is False
    assert again["reason"].startswith("nothing to compact: 0 L0 view(s) and 1 sorted run(s)")


def test_empty_database(cli_store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "create-db")[0] == 0
    _, shape, _ = cli(capsys, "shape")
    assert shape == {"manifest_id": 1, "l0": [], "sorted_runs": []}
    assert cli(capsys, "shape", "--format", "table")[1] == "(none)\n"
    for argv in (["compact"], ["compact", "--full"]):
        code, result, _ = cli(capsys, *argv)
        assert code == 0 and result["compacted"] is False and result["l0_views"] == 0


def test_shape_table_has_a_row_per_l0_sst_and_sorted_run(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    flush_rounds(cli_store, 4)
    cli(capsys, "compact")
    with Db.open("db", cli_store) as db:
        db.put(b"\x00\xff", b"binary")
        db.put(b"zz", b"text")
        db.flush_memtable()
    code, table, _ = cli(capsys, "shape", "--format", "table")
    assert code == 0
    header, l0, run = table.splitlines()
    assert header.split() == ["level", "id", "ssts", "first_key", "last_key", "bytes", "entries"]
    # Keys use the data commands' convention: text, else hex:<hex>.
    assert l0.split()[0] == "L0" and l0.split()[2:5] == ["1", "hex:00ff", "zz"] and l0.split()[-1] == "2"
    assert run.split()[:5] == ["SR", "0", "1", "k00", "k09"] and run.split()[-1] == "10"
    _, shape, _ = cli(capsys, "shape")
    assert shape["l0"][0]["first_key"] == "hex:00ff"  # pasteable into scan --from


def test_compact_report_as_table(cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]) -> None:
    flush_rounds(cli_store, 4)
    code, table, _ = cli(capsys, "compact", "--format", "table")
    assert code == 0
    lines = dict(line.split(None, 1) for line in table.splitlines())
    assert (lines["compacted"], lines["kind"], lines["executor"], lines["rows_out"]) == (
        "true",
        "l0",
        "local",
        "10",
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["compact", "--executor", "ray"],
        ["compact", "--full", "yes"],
        ["compact", "--executor"],
        ["shape", "--level", "0"],
        ["shape", "--format", "csv"],
    ],
)
def test_usage_errors_exit_2(cli_store_url: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["--path", "db", *argv])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert "usage: slate-ops" in err and "invalid choice: '" + argv[0] not in err


def test_missing_database_exits_1(cli_store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["compact"], ["shape"]):
        code, out, err = cli(capsys, *argv)
        assert code == 1 and out == "" and err.startswith("slate-ops: error:") and err.count("\n") == 1


def test_cli_imports_pyspark_only_for_spark_compactions(cli_store: ObjectStore, cli_store_url: str) -> None:
    flush_rounds(cli_store, 4)
    script = (
        "import sys\nfrom slate_ops.cli import main\n"
        "assert main(['--path', 'db', 'compact']) == 0\nassert main(['--path', 'db', 'shape']) == 0\n"
        "assert 'pyspark' not in sys.modules, 'the CLI imported pyspark'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "SLATE_OPS_STORE": cli_store_url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def assert_compacted_on_spark(report: dict[str, Any], store: ObjectStore) -> None:
    """The report of ``compact --executor spark`` over four flushed rounds, and the data after it."""
    assert (report["compacted"], report["kind"], report["executor"], report["rows_out"]) == (
        True,
        "l0",
        "spark",
        10,
    )
    assert contents(store) == {key: b"v3" for key in KEYS}


@pytest.mark.spark
def test_compact_on_spark_in_this_process(cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]) -> None:
    """``compact --executor spark`` through ``main``: it takes this process's session (starting one if
    none is active) and stops it; a later test that needs one starts another on the same JVM."""
    pytest.importorskip("slate_ops.spark")
    flush_rounds(cli_store, 4)
    code, report, err = cli(capsys, "compact", "--executor", "spark")
    assert code == 0, err
    assert_compacted_on_spark(report, cli_store)


@pytest.mark.spark
@pytest.mark.e2e  # the console script in its own process, which starts its own JVM (~20 s): CI's second step
@pytest.mark.slow
def test_compact_on_spark(cli_store: ObjectStore, cli_store_url: str) -> None:
    """``compact --executor spark`` starts a local session and stops it (own process: the stop must
    not end another test's session)."""
    pytest.importorskip("slate_ops.spark")
    flush_rounds(cli_store, 4)
    slate_ops = str(Path(sys.executable).with_name("slate-ops"))
    done = subprocess.run(
        [slate_ops, "--path", "db", "compact", "--executor", "spark"],
        env={**os.environ, "SLATE_OPS_STORE": cli_store_url},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert_compacted_on_spark(report, cli_store)
