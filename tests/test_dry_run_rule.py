"""One dry-run rule on every surface (docs/cli.md, "Dry run by default").

The test walks the table in docs/cli.md: for each operation it lists, the default Python call and the
default CLI command must report something a real run would do and change nothing in the store. An
operation added to the table without a case here, or a case without a row, fails the test.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slate_ops import Db, admin
from slate_ops.admin.tag_policy import TagPolicy
from slate_ops.cli import main
from slate_ops.compaction import Compactor, CompactorOptions
from slate_ops.config import CheckpointOptions
from slate_ops.objstore import LocalStore
from slate_ops.runtime import ManualRuntime
from tests.support.engine import quiet
from tests.support.stores import snapshot

ROOT = Path(__file__).resolve().parents[1]
DB = "db"
PLAIN = "plain"  # no checkpoint holds it: a hard destroy is allowed
DAY = 86_400.0


def table_rows() -> dict[str, tuple[str, str]]:
    """``operation -> (python call, CLI command)`` from the table between the markers in docs/cli.md."""
    text = (ROOT / "docs" / "cli.md").read_text()
    block = text.split("<!-- dry-run table -->")[1]
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] not in ("operation", "") and not set(cells[0]) <= {"-"}:
            rows[cells[0]] = (cells[1].strip("`"), cells[2].strip("`"))
    return rows


def age(root: Path, seconds: float) -> None:
    then = time.time() - seconds
    for path in root.rglob("*"):
        if path.is_file() and ".locks" not in path.parts:
            os.utime(path, (then, then))


@pytest.fixture
def store_with_work(tmp_path: Path) -> LocalStore:
    """A database with something for every destructive operation to do: garbage a day old, an
    expired checkpoint, a live one, tags with writes after them."""
    store = LocalStore(tmp_path / "store")
    a_day_ago = ManualRuntime(time.time() - 2 * DAY)
    for round_ in range(3):
        with Db.open(DB, store, quiet(), clock=a_day_ago) as db:
            for i in range(30):
                db.put(b"k%03d" % i, b"v%d" % round_)
            db.flush_memtable()
    options = CompactorOptions(min_sources=2, compaction_checkpoint_lifetime="1s")
    compactor = Compactor(DB, store, options, clock=a_day_ago)
    compactor.run_once()
    compactor.close()
    admin.create_checkpoint(DB, store, CheckpointOptions(lifetime="1h", name="expired"), clock=a_day_ago)
    admin.create_checkpoint(DB, store, CheckpointOptions(name="live"))
    admin.create_tag(DB, store, "v1")
    admin.create_tag(DB, store, "auto-2020-01-01")  # an old tag of the default policy
    with Db.open(DB, store, quiet()) as db:
        db.put(b"after", b"the tag")
        db.flush_memtable()
    with Db.open(PLAIN, store, quiet()) as db:
        db.put(b"k", b"v")
        db.flush_memtable()
    age(store.root, DAY)
    return store


def live_checkpoint(store: LocalStore) -> uuid.UUID:
    return next(c.id for c in admin.list_checkpoints(DB, store) if c.name == "live")


POLICY = {"create_time": "00:00", "create_interval_days": 1, "num_retained_max": 1}

Case = tuple[Callable[[LocalStore], Any], Callable[[LocalStore], list[str]], Callable[[Any], bool]]
# operation -> (the default Python call, the default CLI arguments, what its Python report must show)
CASES: dict[str, Case] = {
    "garbage collection": (
        lambda s: admin.run_gc(DB, s),
        lambda s: ["gc"],
        lambda r: bool(r.deleted_keys()),
    ),
    "soft destroy": (
        lambda s: admin.destroy(DB, s),
        lambda s: ["destroy"],
        lambda r: r.dry_run and r.destroyed_at_s is not None,
    ),
    "hard destroy": (
        lambda s: admin.destroy(PLAIN, s, soft=False),
        lambda s: ["--path", PLAIN, "destroy", "--hard"],
        lambda r: r.dry_run and bool(r.deleted),
    ),
    "rollback to a tag": (
        lambda s: admin.rollback_to_tag(DB, s, "v1"),
        lambda s: ["rollback", "-n", "v1"],
        lambda r: r.dry_run and bool(r.discarded_ssts),
    ),
    "delete a tag": (
        lambda s: admin.delete_tag(DB, s, "v1"),
        lambda s: ["delete-tag", "-n", "v1"],
        lambda r: True,
    ),
    "delete a checkpoint": (
        lambda s: admin.delete_checkpoint(DB, s, live_checkpoint(s)),
        lambda s: ["delete-checkpoint", "-i", str(live_checkpoint(s))],
        lambda r: True,
    ),
    "expire checkpoints": (
        lambda s: admin.expire_checkpoints(DB, s),
        lambda s: ["expire-checkpoints"],
        lambda r: r.dry_run and bool(r.expired),
    ),
    "apply a tag policy": (
        lambda s: admin.apply_tag_policy(DB, s, TagPolicy(**POLICY)),  # type: ignore[arg-type]
        lambda s: ["apply-tag-policy", "--keep", "1"],
        lambda r: r.dry_run,
    ),
}


def test_the_table_and_the_cases_name_the_same_operations() -> None:
    assert set(table_rows()) == set(CASES)


@pytest.mark.parametrize("operation", sorted(CASES))
def test_a_default_python_call_changes_nothing(store_with_work: LocalStore, operation: str) -> None:
    call, _, shows = CASES[operation]
    before = snapshot(store_with_work)
    report = call(store_with_work)
    assert snapshot(store_with_work) == before, f"{operation}: the default Python call changed the store"
    assert shows(report), f"{operation}: the dry run reported nothing to do: {report}"


@pytest.mark.parametrize("operation", sorted(CASES))
def test_a_default_cli_command_changes_nothing_and_says_so(
    store_with_work: LocalStore, operation: str
) -> None:
    _, argv, _ = CASES[operation]
    before = snapshot(store_with_work)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--store", store_with_work.url, "--path", DB, *argv(store_with_work)])
    assert code == 0, err.getvalue()
    assert snapshot(store_with_work) == before, f"{operation}: the default CLI command changed the store"
    report = json.loads(out.getvalue())
    assert report.get("dry_run", True) is not False
    assert re.search(r"nothing was changed.*--no-dry-run", err.getvalue()), err.getvalue()


def test_acting_takes_no_dry_run(store_with_work: LocalStore) -> None:
    """The way out the report names works: the same command with --no-dry-run acts."""
    before = snapshot(store_with_work)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["--store", store_with_work.url, "--path", DB, "gc", "--no-dry-run"]) == 0
    assert snapshot(store_with_work) != before
