"""Runs the bad-input catalogue (issue 8): every case in ``tests/reliability/bad_inputs/`` (one module
per group; the package docstring says what a case checks and the three ``writes`` standards).

``python -m tests.reliability.test_bad_inputs`` prints the catalogue's size per group.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from slate_ops import Db, DbReader
from slate_ops.cli import main
from slate_ops.engine.wal_chain import is_data
from slate_ops.errors import SlateOpsError
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import open_store
from slate_ops.objstore.base import ObjectStore

# Importing the package registers every group's cases, in the catalogue's order.
from tests.reliability.bad_inputs.catalogue import CASES, Case, Cli, Env, summary
from tests.reliability.bad_inputs.cli_usage import subcommands
from tests.reliability.bad_inputs.missing_database import CREATES_DB, ON_MISSING_DB
from tests.support.stores import snapshot

__all__ = ["CASES", "summary"]  # tests/reliability/report.py reads summary() from here


def _params() -> Iterator[Any]:
    for entry in CASES:
        yield pytest.param(entry, id=f"{entry.group}: {entry.name}", marks=entry.marks)


def _consume(result: object) -> object:
    if isinstance(result, Iterator):
        return list(result)
    close = getattr(result, "close", None)
    if isinstance(result, Db | DbReader) and close is not None:
        close()
    return result


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    return code, capsys.readouterr().err


def _manifest_state(store: ObjectStore, path: str) -> Manifest | None:
    try:
        current = ManifestStore(store, path).read_latest()
    except SlateOpsError:
        return None  # damaged: "net" is not used on such cases
    return None if current is None else current.value


def _check_writes(
    case_: Case,
    env: Env,
    before: dict[str, str],
    after: dict[str, str],
    manifest_before: Manifest | None,
    message: str,
) -> None:
    if case_.writes == "none":
        assert after == before, f"the store changed: {sorted(set(after) ^ set(before))}"
        return
    listing = env.listing or env.store
    changed = [k for k, etag in before.items() if after.get(k) != etag]
    assert not changed, f"existing objects changed or vanished: {changed}"
    new = sorted(set(after) - set(before))
    for key in new:
        metadata = "/manifest/" in key or "/compactions/" in key
        fence = "/wal/" in key and not is_data(listing.head(key).size)
        assert metadata or fence, f"{key} was left behind"
    if case_.writes == "unconfirmed":
        assert any(key in message for key in new), f"the message names none of the new versions {new}"
        return
    manifest_after = _manifest_state(listing, case_.db)
    assert manifest_before is not None and manifest_after is not None
    assert {c.id for c in manifest_after.checkpoints} == {c.id for c in manifest_before.checkpoints}
    assert (manifest_after.l0, manifest_after.compacted, manifest_after.ssts) == (
        manifest_before.l0,
        manifest_before.compacted,
        manifest_before.ssts,
    )


@pytest.mark.parametrize("entry", list(_params()))
def test_bad_input(
    entry: Case,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = open_store(f"memory://bad-inputs-{uuid.uuid4().hex}")
    env = Env(store, request, monkeypatch)
    try:
        entry.setup(env)
        listing = env.listing or env.store
        before = snapshot(listing)
        manifest_before = _manifest_state(listing, entry.db)
        message = _act(entry, env, capsys)
        after = snapshot(listing)
        for template in entry.contains:
            assert env.format(template) in message, f"{env.format(template)!r} not in: {message}"
        _check_writes(entry, env, before, after, manifest_before, message)
    finally:
        for close in reversed(env.cleanup):
            with contextlib.suppress(SlateOpsError):
                close()


def _act(entry: Case, env: Env, capsys: pytest.CaptureFixture[str]) -> str:
    """Run the action; returns the message to check (the error's text, or the CLI's stderr)."""
    action = entry.action
    if isinstance(entry.expect, int):
        if isinstance(action, Cli):
            code, err = _run_cli(action.resolve(env), capsys)
        else:
            try:
                action(env)
                code = 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
            err = capsys.readouterr().err
        assert code == entry.expect, f"exit {code}, stderr: {err}"
        if code == 1:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("slate-ops: error: "), err
        if code == 2:
            assert "usage: slate-ops" in err, err
        return err
    assert not isinstance(action, Cli)
    if entry.expect is None:
        _consume(action(env))
        return ""
    with pytest.raises(SlateOpsError) as info:
        _consume(action(env))
    assert isinstance(info.value, entry.expect), f"{type(info.value).__name__}: {info.value}"
    return str(info.value)


def test_catalogue_covers_every_command() -> None:
    """The CLI usage and missing-database groups reach every subcommand: a new command needs its
    missing-database case."""
    names = set(subcommands())
    assert set(ON_MISSING_DB) == names - CREATES_DB
    assert len(CASES) == sum(summary().values()) >= 200


def _main(groups: Iterable[tuple[str, int]]) -> None:
    for group_name, count in groups:
        print(f"{count:4d}  {group_name}")
    print(f"{len(CASES):4d}  bad inputs in the catalogue")


if __name__ == "__main__":
    _main(summary().items())
