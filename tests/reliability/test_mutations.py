"""The planted-bug check (tests/reliability/mutations.py): its patches still apply, and the proof
catches every planted bug on every run (the whole check is ``slow``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability import mutations
from tests.reliability.mutations import MUTATIONS, AnchorError, Edit, patched_text, plant


def test_every_mutation_applies_to_the_tree() -> None:
    """A refactor that moves an anchor fails here, in CI, not an hour into the slow check."""
    assert len(mutations.check_all()) == len(MUTATIONS)
    assert len({m.name for m in MUTATIONS}) == len(MUTATIONS)


def test_an_anchor_missing_or_found_twice_fails_loudly() -> None:
    with pytest.raises(AnchorError, match=r"occurs 0 times in f\.py"):
        patched_text("a = 1\n", [Edit("f.py", "b = 2\n", "b = 3\n")], "mutation m")
    with pytest.raises(AnchorError, match="occurs 2 times"):
        patched_text("a = 1\na = 1\n", [Edit("f.py", "a = 1\n", "a = 2\n")], "mutation m")


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_planting_changes_the_named_files_and_compiles(mutation: mutations.Mutation, tmp_path: Path) -> None:
    for path in mutation.files:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(mutations.REPO / path, tmp_path / path)
    changed = plant(mutation, tmp_path)
    assert set(changed) == set(mutation.files)
    for path, (original, text) in changed.items():
        assert original != text and "MUTATION" in text
        assert (tmp_path / path).read_text() == text
    assert "MUTATION" not in (mutations.REPO / mutation.files[0]).read_text()  # the checkout is untouched


@pytest.mark.slow
@pytest.mark.timeout(0)
def test_the_proof_catches_every_planted_bug_on_every_run(tmp_path: Path) -> None:
    """``python -m tests.reliability.mutations`` (2 runs per mutation and of the baseline), with its
    result file in a temporary directory so the committed one is not touched."""
    output = tmp_path / "mutations.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [sys.executable, "-m", "tests.reliability.mutations", "--runs", "2", "--output", str(output)],
        cwd=mutations.REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    print(done.stdout[-5000:])
    assert output.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(output.read_text())
    base = result["baseline"]
    assert base["passed"] == base["runs"] == 2, base["details"]
    missed = {
        m["name"]: f"{m['caught']}/{m['runs']}" for m in result["mutations"] if m["caught"] != m["runs"]
    }
    assert not missed, f"planted bugs the proof did not catch on every run: {missed}"
    assert {m["name"] for m in result["mutations"]} == {m.name for m in MUTATIONS}
    assert done.returncode == 0 and result["ok"]
