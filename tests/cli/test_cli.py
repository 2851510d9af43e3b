from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from slate_ops import admin
from slate_ops.cli import main
from slate_ops.config import CheckpointOptions
from slate_ops.objstore import open_store
from slate_ops.runtime import ManualRuntime


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, object, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out and code == 0 and "--format" not in argv else out), err


def test_checkpoint_lifecycle_in_json(cli_store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--path", "db", "create-db")[1] == {"path": "db", "manifest_id": 1}
    code, created, _ = run(
        capsys, "--path", "db", "create-checkpoint", "-l", "7days 30min 10s", "-n", "nightly"
    )
    assert code == 0 and isinstance(created, dict) and created["manifest_id"] == 2
    _, listed, _ = run(capsys, "--path", "db", "list-checkpoints", "-n", "nightly")
    assert isinstance(listed, list) and [c["id"] for c in listed] == [created["id"]]
    (checkpoint,) = listed
    lifetime = 7 * 86400 + 30 * 60 + 10  # create time is rounded down, expiry up
    assert checkpoint["expire_time_s"] - checkpoint["create_time_s"] in (lifetime, lifetime + 1)
    _, refreshed, _ = run(capsys, "--path", "db", "refresh-checkpoint", "-i", created["id"])
    assert isinstance(refreshed, dict) and refreshed["expire_time_s"] is None
    _, derived, _ = run(capsys, "--path", "db", "create-checkpoint", "-s", created["id"])
    assert isinstance(derived, dict) and derived["manifest_id"] == 2
    assert run(capsys, "--path", "db", "delete-checkpoint", "-i", created["id"], "--no-dry-run")[0] == 0
    _, manifest, _ = run(capsys, "--path", "db", "read-manifest")
    assert isinstance(manifest, dict) and manifest["id"] == 5
    assert [c["id"] for c in manifest["manifest"]["checkpoints"]] == [derived["id"]]
    _, first, _ = run(capsys, "--path", "db", "read-manifest", "-i", "1")
    assert isinstance(first, dict) and first["manifest"]["checkpoints"] == []
    _, manifests, _ = run(capsys, "--path", "db", "list-manifests")
    assert isinstance(manifests, list) and [m["id"] for m in manifests] == [1, 2, 3, 4, 5]


def test_expire_checkpoints_defaults_to_dry_run(
    cli_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "--path", "db", "create-db")
    an_hour_ago = ManualRuntime(time.time() - 3600)
    admin.create_checkpoint(
        "db", open_store(cli_store_url), CheckpointOptions(lifetime="10s"), clock=an_hour_ago
    )
    run(capsys, "--path", "db", "create-checkpoint", "-l", "1day")
    _, dry, _ = run(capsys, "--path", "db", "expire-checkpoints")
    assert isinstance(dry, dict) and dry["dry_run"] and len(dry["expired"]) == 1
    assert len(run(capsys, "--path", "db", "list-checkpoints")[1]) == 2  # type: ignore[arg-type]
    _, real, _ = run(capsys, "--path", "db", "expire-checkpoints", "--no-dry-run")
    assert isinstance(real, dict) and not real["dry_run"] and real["expired"] == dry["expired"]
    assert len(run(capsys, "--path", "db", "list-checkpoints")[1]) == 1  # type: ignore[arg-type]


def test_table_format(cli_store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "--path", "db", "create-db")
    run(capsys, "--path", "db", "create-checkpoint", "-n", "n1")
    code, out, _ = run(capsys, "--path", "db", "--format", "table", "list-checkpoints")
    lines = str(out).splitlines()
    assert code == 0 and lines[0].split()[:2] == ["id", "manifest_id"] and "n1" in lines[1]
    code, out, _ = run(capsys, "--format", "table", "--path", "db", "describe")
    assert code == 0 and any(line.split() == ["checkpoints", "1"] for line in str(out).splitlines())


@pytest.mark.parametrize(
    "argv",
    [
        ["create-checkpoint"],  # no --path
        ["--path", "db", "refresh-checkpoint"],  # no --id
        ["--path", "db", "delete-checkpoint", "-i", "not-a-uuid"],
        ["--path", "db", "create-checkpoint", "-l", "7 fortnights"],
        ["--path", "db", "read-manifest", "-i", "0"],
        ["--path", "db", "frobnicate"],
    ],
)
def test_usage_errors_exit_2(cli_store_url: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_operation_errors_exit_1_with_one_line(
    cli_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(uuid.uuid4())
    code, _, err = run(capsys, "--path", "db", "list-checkpoints")
    assert code == 1 and err.count("\n") == 1 and "no database at" in err and "create-db" in err
    run(capsys, "--path", "db", "create-db")
    code, _, err = run(capsys, "--path", "db", "delete-checkpoint", "-i", missing)
    assert code == 1 and err.count("\n") == 1 and missing in err


def test_console_script_with_explicit_store(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "slate-ops"
    env = {k: v for k, v in os.environ.items() if k != "SLATE_OPS_STORE"}
    store = f"--store={(tmp_path / 's').as_uri()}"
    created = subprocess.run(
        [script, store, "--path", "x", "create-db"], capture_output=True, text=True, env=env
    )
    assert created.returncode == 0, created.stderr
    described = subprocess.run(
        [script, "describe", store, "--path", "x"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert described.returncode == 0 and json.loads(described.stdout)["manifest_id"] == 1
    assert not (tmp_path / ".slate").exists()  # the explicit store was used, not the default


def test_default_store_is_dot_slate_in_cwd(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "slate-ops"
    env = {k: v for k, v in os.environ.items() if k != "SLATE_OPS_STORE"}
    done = subprocess.run(
        [script, "--path", "demo", "create-db"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / ".slate" / "demo" / "manifest" / "00000000000000000001.manifest").is_file()


def test_verify_reports_every_check_and_fails_on_a_missing_sst(
    cli_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "--path", "db", "put", "--create", "k", "v")[0] == 0
    assert run(capsys, "--path", "db", "flush")[0] == 0
    code, checks, _ = run(capsys, "--path", "db", "verify")
    assert code == 0 and isinstance(checks, list)
    assert {c["name"] for c in checks} >= {"ssts_exist", "sorted_runs_ordered"}
    assert all(c["passed"] for c in checks if c["severity"] == "error")

    store = open_store(cli_store_url)
    (sst,) = [m.key for m in store.list("db/compacted/")]
    store.delete(sst)
    code, out, _ = run(capsys, "--path", "db", "verify")
    assert code == 1
    failed = [c for c in json.loads(str(out)) if not c["passed"]]
    assert [c["name"] for c in failed] == ["ssts_exist"] and sst in failed[0]["problems"][0]


def test_the_operator_api_names_are_aliases(cli_store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/cli.md's naming table: each command also answers to its operator-API name."""
    run(capsys, "--path", "db", "create-db")
    assert run(capsys, "--path", "db", "describe-db")[1] == run(capsys, "--path", "db", "describe")[1]
    assert run(capsys, "--path", "db", "lsm-shape")[1] == run(capsys, "--path", "db", "shape")[1]
    code, report, _ = run(capsys, "--path", "db", "run-gc", "--dry-run")
    assert code == 0 and isinstance(report, dict) and report["dry_run"] is True
