"""The CLI never prints a secret, and never creates or deletes what was not named (docs/cli.md "Safety").

- store URLs in errors are redacted, whatever the form of the secret (the real console script);
- no parser accepts an abbreviated option, and a mistyped one gets "did you mean" and exit 2;
- ``put``/``delete`` refuse a database that does not exist unless ``--create``;
- every read-only command (and every dry run) leaves the store exactly as it was: against a root that
  does not exist, an existing empty root and a populated store; a missing root is named.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from slate_ops import Db, admin
from slate_ops.cli import main
from slate_ops.cli.command import Command
from slate_ops.cli.main import GROUPS, build_parser
from slate_ops.config import CheckpointOptions
from slate_ops.objstore import open_store
from slate_ops.objstore.url import mistyped_scheme
from slate_ops.runtime import ManualRuntime

SECRET = "S3CR3T-cli-0123"

Snapshot = dict[str, tuple[bool, int, int]]


def snapshot(root: Path) -> Snapshot | None:
    """Every file and directory under ``root`` with its kind, size and mtime; None if no root."""
    if not root.exists():
        return None
    return {
        str(path.relative_to(root)): (path.is_dir(), path.stat().st_size, path.stat().st_mtime_ns)
        for path in root.rglob("*")
    }


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``main(argv)``: the exit code (argparse's SystemExit code included), stdout and stderr."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def console(
    *argv: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The real ``slate-ops`` console script."""
    script = Path(sys.executable).parent / "slate-ops"
    base = {k: v for k, v in os.environ.items() if k != "SLATE_OPS_STORE"}
    return subprocess.run(
        [str(script), *argv],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        cwd=cwd,
        timeout=120,
    )


# --- secrets ----------------------------------------------------------------------------------------

SECRET_STORE_URLS = [
    f"s3://bucket/x?secret%5Faccess%5Fkey={SECRET}&bogus=1",
    f"s3://bucket/x?session%5Ftoken={SECRET}&bogus=1",
    f"s3://bucket/x?endpoint_url=http://user:{SECRET}@127.0.0.1:1&bogus=1",
    f"s3://bucket/x?endpoint_url=http://user:{SECRET}@127.0.0.1:1",
    f"s3://bucket/x?aws_secret_access_key={SECRET}",
    f"s3://user:{SECRET}@bucket/x",
]


@pytest.mark.parametrize("url", SECRET_STORE_URLS)
def test_the_cli_never_prints_a_secret_of_the_store_url(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``main`` in this process; the console script below is the same code behind Python's start-up."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLATE_OPS_STORE", url)
    for given in (("--store", url), ()):  # on the command line, and in $SLATE_OPS_STORE
        code, out, err = run(capsys, *given, "--path", "db", "describe")
        assert code == 1, err
        assert "bucket" in err and "slate-ops: error:" in err
        assert SECRET not in err and SECRET not in out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "url",
    [  # one in the default run; each process costs ~1 s, so the others run in CI's second step
        SECRET_STORE_URLS[0],
        *(pytest.param(url, marks=(pytest.mark.e2e, pytest.mark.slow)) for url in SECRET_STORE_URLS[1:]),
    ],
)
def test_the_console_never_prints_a_secret_of_the_store_url(url: str, tmp_path: Path) -> None:
    for given in (("--store", url), ()):  # on the command line, and in $SLATE_OPS_STORE
        done = console(*given, "--path", "db", "describe", env={"SLATE_OPS_STORE": url}, cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        assert "bucket" in done.stderr and "slate-ops: error:" in done.stderr
        assert SECRET not in done.stderr and SECRET not in done.stdout
    assert list(tmp_path.iterdir()) == []


# --- no abbreviations ---------------------------------------------------------------------------------


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every parser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                yield from parsers(sub)


def test_no_parser_of_the_tree_accepts_abbreviations() -> None:
    tree = list(parsers(build_parser()))
    assert len(tree) > sum(len(group) for group in GROUPS)  # the root and every command
    assert [p.prog for p in tree if p.allow_abbrev] == []


@pytest.fixture
def store_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "store"
    monkeypatch.setenv("SLATE_OPS_STORE", root.as_uri())
    return root


@pytest.fixture
def populated(store_root: Path) -> Path:
    """A database ``db`` with flushed and unflushed data, a checkpoint that expired an hour ago (a real
    GC or expire-checkpoints would remove it), a live one and a tag ``t``; and a second database."""
    store = open_store(store_root.as_uri())
    admin.create_db("db", store)
    with Db.open("db", store) as db:
        db.put(b"a", b"1")
        db.flush()
        db.put(b"b", b"2")
    an_hour_ago = ManualRuntime(time.time() - 3600)
    admin.create_checkpoint(
        "db", store, CheckpointOptions.model_validate({"lifetime": "1min"}), clock=an_hour_ago
    )
    admin.create_checkpoint(
        "db", store, CheckpointOptions.model_validate({"lifetime": "1days", "name": "live"})
    )
    admin.create_tag("db", store, "t")
    admin.create_db("other", store)
    return store_root


def test_an_abbreviated_no_dry_run_changes_nothing(
    populated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(populated)
    code, out, err = run(capsys, "--path", "db", "gc", "--no-dry")
    assert code == 2 and out == ""
    assert "unrecognized arguments: --no-dry" in err and "did you mean --no-dry-run?" in err
    assert snapshot(populated) == before
    # the same for every destructive switch, on the command's own parser
    for argv, meant in (
        (("destroy", "--no-dry"), "--no-dry-run"),
        (("destroy", "--har"), "--hard"),
        (("expire-checkpoints", "--no-dry-rn"), "--no-dry-run"),
        (("delete-tag", "-n", "t", "--no-dryrun"), "--no-dry-run"),
        (("create-tag", "-n", "u", "--repl"), "--replace"),
        (("put", "k", "v", "--creat"), "--create"),
    ):
        code, _, err = run(capsys, "--path", "db", *argv)
        assert code == 2 and f"did you mean {meant}?" in err, (argv, err)
    assert snapshot(populated) == before


# --- writes never create what was not named -----------------------------------------------------------


@pytest.mark.parametrize("command", [("put", "k", "v"), ("delete", "k")])
def test_a_write_to_a_missing_database_is_refused(
    command: tuple[str, ...], populated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(populated)
    code, out, err = run(capsys, "--path", "dmeo", *command)  # a typo of "db"
    assert code == 1 and out == ""
    assert "no database at" in err and "dmeo" in err and "create-db" in err and "--create" in err
    assert snapshot(populated) == before
    assert [d.path for d in admin.list_dbs("", open_store(populated.as_uri()))] == ["db", "other"]


def test_a_write_creates_a_database_only_when_asked(
    store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "--path", "new", "put", "k", "v")[0] == 1
    assert snapshot(store_root) is None  # not even the store's directory
    assert run(capsys, "--path", "new", "put", "--create", "k", "v")[0] == 0
    assert run(capsys, "--path", "new", "put", "k2", "v2")[0] == 0  # it exists now
    assert run(capsys, "--path", "made", "create-db")[0] == 0
    assert run(capsys, "--path", "made", "delete", "k")[0] == 0
    code, out, _ = run(capsys, "--path", "new", "get", "k2")
    assert code == 0 and json.loads(out) == {"key": "k2", "value": "v2"}


# --- read-only commands write nothing ----------------------------------------------------------------

CHECKPOINT = str(uuid.uuid4())

ARGUMENTS: dict[str, tuple[str, ...]] = {
    "suggest-split-keys": ("-n", "2"),
    "delete-checkpoint": ("-i", CHECKPOINT),
    "delete-tag": ("-n", "t"),
    "rollback": ("-n", "t"),
}
"""The required arguments of the read-only commands and dry runs that have some."""


def read_only_runs() -> list[tuple[str, ...]]:
    """Every read-only command of the CLI package, and every command with --dry-run as a dry run (with
    ``--hard`` too where it has one), found from the commands' declarations."""
    runs: list[tuple[str, ...]] = []
    parser = build_parser()
    commands: list[Command] = [command for group in GROUPS for command in group]
    for command in commands:
        sub = next(p for p in parsers(parser) if p.prog.endswith(f" {command.name}"))
        flags = {flag for action in sub._actions for flag in action.option_strings}
        if command.read_only:
            runs.append((command.name, *ARGUMENTS.get(command.name, ())))
        elif "--dry-run" in flags:
            runs.append((command.name, *ARGUMENTS.get(command.name, ()), "--dry-run"))
            if "--hard" in flags:
                runs.append((command.name, "--hard", "--dry-run"))
    return runs


READ_ONLY_RUNS = read_only_runs()


def test_the_read_only_runs_are_all_there() -> None:
    names = {argv[0] for argv in READ_ONLY_RUNS}
    assert names >= {"describe", "list-dbs", "verify", "history", "shape", "gc", "destroy", "rollback"}
    assert not names & {"put", "delete", "create-db", "flush", "compact", "split", "merge", "clone"}
    assert not names & {"get", "scan"}  # their reader writes its checkpoint: see below


@pytest.mark.parametrize("argv", READ_ONLY_RUNS, ids=" ".join)
def test_a_read_only_command_against_a_missing_root_creates_nothing(
    argv: tuple[str, ...], store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--path", "db", *argv)
    assert snapshot(store_root) is None
    assert code == 1 and out == "", err
    assert "does not exist" in err and str(store_root) in err and err.count("\n") == 1


@pytest.mark.parametrize("argv", READ_ONLY_RUNS, ids=" ".join)
def test_a_read_only_command_against_an_empty_root_changes_nothing(
    argv: tuple[str, ...], store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_root.mkdir()
    before = snapshot(store_root)
    code, _, err = run(capsys, "--path", "db", *argv)
    assert snapshot(store_root) == before == {}
    assert code in (0, 1), err  # list-dbs lists nothing; the others find no database


@pytest.mark.parametrize("argv", READ_ONLY_RUNS, ids=" ".join)
def test_a_read_only_command_against_a_populated_store_changes_nothing(
    argv: tuple[str, ...], populated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(populated)
    code, _, err = run(capsys, "--path", "db", *argv)
    assert code in (0, 1), err
    assert snapshot(populated) == before


# --- a mistyped store ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "meant"),
    [
        ("s3//bucket/x", "s3://bucket/x"),
        ("s3:/bucket/x", "s3://bucket/x"),
        ("S3:bucket", "s3://bucket"),
        ("file:/tmp/x", "file:///tmp/x"),
        ("memory//m", "memory://m"),
        ("s3://bucket/x", None),
        ("data/s3", None),
        ("./s3/bucket", None),
    ],
)
def test_mistyped_schemes_are_recognised(text: str, meant: str | None) -> None:
    assert mistyped_scheme(text) == meant


@pytest.mark.parametrize(
    "command", [("describe",), ("list-dbs",), ("create-db",), ("put", "--create", "k", "v")]
)
def test_a_mistyped_scheme_creates_nothing(
    command: tuple[str, ...],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "--store", "s3//bucket/x", "--path", "db", *command)
    assert code == 1 and out == ""
    assert "no such directory" in err and "did you mean s3://bucket/x?" in err.lower()
    assert list(tmp_path.iterdir()) == []


def test_a_missing_file_root_is_named_and_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "nowhere"
    done = console("--store", root.as_uri(), "--path", "db", "describe")
    assert done.returncode == 1 and "does not exist" in done.stderr and str(root) in done.stderr
    assert not root.exists()


@pytest.mark.parametrize("argv", [("get", "a"), ("scan",)], ids=" ".join)
def test_get_and_scan_write_only_their_reader_checkpoint(
    argv: tuple[str, ...], populated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A DbReader protects what it reads with a checkpoint of its own: two manifest versions (added,
    then removed on close), and nothing else; against a missing root, nothing at all."""
    before = snapshot(populated)
    assert before is not None
    checkpoints = admin.read_manifest("db", open_store(populated.as_uri())).value.checkpoints
    code, _, err = run(capsys, "--path", "db", *argv)
    assert code == 0, err
    after = snapshot(populated)
    assert after is not None
    changed = {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}
    assert changed and all(p.startswith(("db/manifest", ".locks")) for p in changed), changed
    assert admin.read_manifest("db", open_store(populated.as_uri())).value.checkpoints == checkpoints
    missing = populated.parent / "missing"
    code, _, err = run(capsys, "--store", missing.as_uri(), "--path", "db", *argv)
    assert code == 1 and "no database at" in err and "does not exist" in err
    assert not missing.exists()
