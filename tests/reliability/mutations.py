"""The proof must bite: plant known bugs one at a time and require the CI-sized proof to catch each.

In the spirit of FoundationDB's BUGGIFY and SQLite's test harnesses, but from the outside: every
entry of :data:`MUTATIONS` is a named bug written as a textual patch (a file, an exact anchor text,
its replacement). For each one this script copies the repository into a scratch directory, applies
the patch there, runs the CI-sized proof (:data:`PROOF`: the default, non-slow reliability, model
and bite tests) against that copy — pytest with the copy as its working directory and
``PYTHONPATH``, so the copy's ``slate_ops`` is the one imported — and requires it to **fail**, on
every one of ``--runs`` runs; a test that also fails unpatched never counts as catching anything.
The unpatched copy must **pass** every run (the baseline runs first). The result table
(mutation, what it plants, caught runs / runs, the test that caught it first, seconds) goes to
``tests/reliability/results/mutations.json``; ``python -m tests.reliability.report`` renders it into
docs/reliability.md.

A patch whose anchor is missing, or found more than once, stops the script before anything runs
(:class:`AnchorError`): a refactor cannot make a mutation silently stop being planted.
``tests/reliability/test_mutations.py`` checks every anchor on every CI run.

Usage::

    python -m tests.reliability.mutations                 # every mutation, 2 runs each, plus the baseline
    python -m tests.reliability.mutations --runs 5        # caught k/5
    python -m tests.reliability.mutations --only gc-ignores-checkpoints --runs 1
    python -m tests.reliability.mutations --rev HEAD      # the committed tree instead of the working tree
    python -m tests.reliability.mutations --check         # only check that every patch applies
    python -m tests.reliability.mutations --list
    python -m tests.reliability.mutations --show NAME     # the patched lines, as a diff
    python -m tests.reliability.mutations --exitfirst     # a planted run stops at its first failure

By default the copy is the working tree: tracked files plus untracked ones that git does not ignore
(what ``pytest`` in this checkout would see); ``--rev`` copies a commit instead (``git archive``).
Every run gets a fresh copy, so nothing (a hypothesis example database, a cache) carries over.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "tests" / "reliability" / "results" / "mutations.json"
COMMAND = "python -m tests.reliability.mutations"

PROOF = (
    "tests/reliability/test_planted_bugs_bite.py",
    "tests/reliability/test_adversary.py",
    "tests/reliability/test_simulation.py",
    "tests/reliability/test_crash_sweep.py",
    "tests/engine/test_model.py",
    "tests/engine/test_fenced_actors.py",
    "tests/engine/test_fencing_races.py",
    "tests/reliability/interleavings/test_interleavings.py",
    "tests/compaction/test_model.py",
    "tests/admin/test_lifecycle_model.py",
    "tests/admin/test_protection.py",
    "tests/admin/test_reachability.py",
)
"""The CI-sized proof, in the order pytest runs it; files missing from the copy are left out."""


# --- the mutations ----------------------------------------------------------------------------------


class AnchorError(Exception):
    """A patch's anchor is not in its file exactly once: the mutation would not be planted."""


@dataclass(frozen=True)
class Edit:
    """Replace the one occurrence of ``anchor`` in ``path`` (repository-relative) with ``replacement``."""

    path: str
    anchor: str
    replacement: str


@dataclass(frozen=True)
class Mutation:
    name: str
    plants: str  # the bug, in one sentence
    edits: tuple[Edit, ...]

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(e.path for e in self.edits))


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "ack-before-wal-write",
        "an await_durable write is acknowledged before its WAL SST exists: the writer advances its "
        "durable sequence number and wakes the waiters before the WAL write, not after it",
        (
            Edit(
                "slate_ops/engine/wal_buffer.py",
                "            segment.in_flight = True\n            future = self._submit(segment, wal_id)\n",
                "            with self._durable:  # MUTATION: durable before the WAL SST exists\n"
                "                self._durable_seq = max(self._durable_seq, segment.entries[-1][1])\n"
                "                self._durable.notify_all()\n"
                "            segment.in_flight = True\n"
                "            future = self._submit(segment, wal_id)\n",
            ),
        ),
    ),
    Mutation(
        "drop-segment-on-failed-write",
        "a WAL segment leaves the flush queue even when its write raised, so the retry (the next "
        "flush) acknowledges writes that are in no WAL SST",
        (
            Edit(
                "slate_ops/engine/wal_buffer.py",
                "                if future.result():\n",
                "                if future.exception() is not None or future.result():  # MUTATION\n"
                "                    # a failed write counts as landed: its segment leaves the queue\n",
            ),
        ),
    ),
    Mutation(
        "l0-compaction-drops-tombstones",
        "an L0 compaction drops tombstones although older sorted runs exist, so a deleted key's "
        "older value in those runs comes back",
        (
            Edit(
                "slate_ops/compaction/scheduler.py",
                'return Proposal("l0", oldest, (), next_id, drop_tombstones=not runs)',
                'return Proposal("l0", oldest, (), next_id, drop_tombstones=True)  # MUTATION',
            ),
        ),
    ),
    Mutation(
        "gc-ignores-checkpoints",
        "GC leaves out the protection of live checkpoints: neither the manifests the latest "
        "manifest's checkpoints pin nor those pinned from the history protect anything",
        (
            Edit(
                "slate_ops/gc/snapshot.py",
                "        for manifest in self.checkpointed():\n"
                "            protection.add(manifest, as_latest=False)\n",
                "        # MUTATION: live checkpoints' manifests protect nothing\n",
            ),
            Edit(
                "slate_ops/gc/snapshot.py",
                "        for manifest_id in pinned:\n"
                "            protection.add(self.manifests[manifest_id], as_latest=False)\n",
                "        # MUTATION: checkpoints pinned from the history protect nothing\n",
            ),
        ),
    ),
    Mutation(
        "shared-final-checkpoint",
        "a clone's external entries all get the same final checkpoint id (one new_final_id() "
        "reused), so releasing one entry's checkpoint unpins the others",
        (
            Edit(
                "slate_ops/admin/clone.py",
                "    inherited = tuple(\n"
                "        replace(ed, source_checkpoint_id=ed.final_checkpoint_id, "
                "final_checkpoint_id=new_final_id())\n",
                "    final_id = new_final_id()  # MUTATION: one final checkpoint for every entry\n"
                "    inherited = tuple(\n"
                "        replace(ed, source_checkpoint_id=ed.final_checkpoint_id, "
                "final_checkpoint_id=final_id)\n",
            ),
            Edit(
                "slate_ops/admin/clone.py",
                "    parent = ExternalDb(parent_path, source_id, new_final_id(), own)\n",
                "    parent = ExternalDb(parent_path, source_id, final_id, own)\n",
            ),
        ),
    ),
)
MUTATIONS += (
    Mutation(
        "no-epoch-check-after-wal-fence",
        "a writer opening does not check its epoch after creating its WAL fence (issue 19, item 1): "
        "a writer whose fence landed above a newer writer's opens, and the newer one then finds WAL "
        "data at its own epoch",
        (
            Edit(
                "slate_ops/engine/db.py",
                "        self._manifest.confirm()\n        self._last_seq = manifest.last_l0_seq\n",
                "        self._last_seq = manifest.last_l0_seq  # MUTATION: no epoch check after the fence\n",
            ),
        ),
    ),
    Mutation(
        "vanished-version-read-as-latest",
        "a sequenced namespace whose cached version vanished with nothing newer reads that version as "
        "still the latest (issue 19, item 2): a writer of a database deleted under it acknowledges "
        "writes and re-creates its manifest",
        (
            Edit(
                "slate_ops/txn/sequenced.py",
                "                        return floor, floor_etag\n"
                "                    raise NamespaceDeletedError(self.directory, floor.id)\n",
                "                        return floor, floor_etag\n"
                "                    return floor, floor_etag  # MUTATION: vanished, yet the latest\n",
            ),
        ),
    ),
    Mutation(
        "l0-commit-skips-epoch-check",
        "the writer's manifest commit on the L0-flush path skips its epoch check (issue 19's held-out "
        "bug): a fenced writer whose WAL write went through commits its L0 SST over the new writer's",
        (
            Edit(
                "slate_ops/engine/flusher.py",
                "            self._manifest.commit(self._l0_flushed(memtable, CompactedSst(sst_id, info)), "
                "reestablish=True)\n",
                "            self._manifest.commit(  # MUTATION: no epoch check\n"
                "                self._l0_flushed(memtable, CompactedSst(sst_id, info)), reestablish=True, "
                "unchecked=True\n"
                "            )\n",
            ),
            Edit(
                "slate_ops/engine/writer_manifest.py",
                "    def commit(self, change: Callable[[Manifest], Manifest], *, reestablish: bool) -> "
                "VersionedManifest:\n",
                "    def commit(\n"
                "        self,\n"
                "        change: Callable[[Manifest], Manifest],\n"
                "        *,\n"
                "        reestablish: bool,\n"
                "        unchecked: bool = False,  # MUTATION: a commit without the epoch check\n"
                "    ) -> VersionedManifest:\n",
            ),
            Edit(
                "slate_ops/engine/writer_manifest.py",
                "                    committed = self._fenced.update(apply)\n",
                "                    store = self._manifests if unchecked else self._fenced\n"
                "                    committed = store.update(apply)\n",
            ),
        ),
    ),
    Mutation(
        "final-checkpoint-refreshable",
        "refresh_checkpoint gives the parent-side final checkpoint of a clone, shard or merge an expiry "
        "(issue 19, item 3): the parent's GC then deletes SSTs the dependent database reads",
        (
            Edit(
                "slate_ops/admin/checkpoints.py",
                "    protection = protection_of(checkpoint)\n"
                "    if protection is None or expire_time_s is None:\n"
                "        return\n",
                "    protection = protection_of(checkpoint)\n"
                "    if protection is None or expire_time_s is None:\n"
                "        return\n"
                "    if (checkpoint.name or '').startswith(FINAL_CHECKPOINT_PREFIX):  # MUTATION\n"
                "        return\n",
            ),
        ),
    ),
    Mutation(
        "root-prefix-deletion",
        "deleting the root database (hard destroy, GC after its grace period) takes everything under its "
        "empty prefix as its own SSTs (issue 19, item 4): objects of no database and nested databases go",
        (
            Edit(
                "slate_ops/gc/destroyed.py",
                "    ssts = [\n"
                "        meta\n"
                "        for meta in store.list(own_directory(path, COMPACTED_DIR))\n"
                "        if parse_sst_key(path, meta.key) is not None\n"
                "    ]\n",
                "    ssts = [  # MUTATION: the root's own objects are everything under its empty prefix\n"
                "        meta\n"
                "        for meta in store.list(own_directory(path, COMPACTED_DIR) if path else '')\n"
                "        if parse_sst_key(path, meta.key) is not None\n"
                "        or (not path and parse_own_manifest_key(path, meta.key) is None)\n"
                "    ]\n",
            ),
        ),
    ),
    Mutation(
        "wal-walk-ignores-gaps",
        "the WAL chain walk steps over a missing id instead of ending there (issue 23): an opener or a "
        "reader replays WAL PUTs of a fenced writer that landed past its first missing one, never "
        "acknowledged",
        (
            Edit(
                "slate_ops/engine/wal_chain.py",
                "    while at in sizes and (upto is None or at <= upto):\n"
                "        at = next_in_chain(at, sizes[at], segments)\n",
                "    while any(i >= at for i in sizes) and (upto is None or at <= upto):  # MUTATION\n"
                "        at = next_in_chain(at, sizes[at], segments) if at in sizes else at + 1\n",
            ),
        ),
    ),
    Mutation(
        "wal-walk-reads-window",
        "the WAL chain walk steps over a window fence like a legacy empty one instead of jumping its "
        "window (issue 23): a fenced writer's PUTs that land inside the window are replayed",
        (
            Edit(
                "slate_ops/engine/wal_chain.py",
                "        return at + WAL_FENCE_WINDOW\n",
                "        return at + 1  # MUTATION: the window fence's ids are read\n",
            ),
        ),
    ),
)
BY_NAME = {m.name: m for m in MUTATIONS}


def patched_text(original: str, edits: Sequence[Edit], where: str) -> str:
    """``original`` with ``edits`` applied in order; :class:`AnchorError` unless each anchor occurs once."""
    text = original
    for edit in edits:
        found = text.count(edit.anchor)
        if found != 1:
            first = edit.anchor.strip().splitlines()[0] if edit.anchor.strip() else repr(edit.anchor)
            raise AnchorError(
                f"{where}: the anchor starting {first!r} occurs {found} times in {edit.path} (expected "
                "once). The code it plants a bug in has changed: update the mutation's anchor and "
                f"replacement in tests/reliability/mutations.py (`{COMMAND} --show NAME` shows the patch)"
            )
        text = text.replace(edit.anchor, edit.replacement)
    return text


def plant(mutation: Mutation, root: Path) -> dict[str, tuple[str, str]]:
    """Apply ``mutation`` to the copy at ``root``; the (original, patched) text of each file.

    Raises :class:`AnchorError` for a missing or ambiguous anchor and :class:`SyntaxError` for a
    patch that does not compile: either would make a "caught" verdict worthless.
    """
    changed: dict[str, tuple[str, str]] = {}
    for path in mutation.files:
        target = root / path
        if not target.is_file():
            raise AnchorError(f"mutation {mutation.name}: {path} does not exist in {root}")
        original = target.read_text()
        text = patched_text(
            original, [e for e in mutation.edits if e.path == path], f"mutation {mutation.name}"
        )
        if text == original:
            raise AnchorError(f"mutation {mutation.name}: the patch leaves {path} unchanged")
        compile(text, str(target), "exec")
        target.write_text(text)
        changed[path] = (original, text)
    return changed


def check_all(root: Path = REPO) -> list[str]:
    """Every mutation applies to the tree at ``root``, in memory; one line per mutation."""
    lines = []
    for mutation in MUTATIONS:
        for path in mutation.files:
            original = (root / path).read_text()
            text = patched_text(
                original, [e for e in mutation.edits if e.path == path], f"mutation {mutation.name}"
            )
            compile(text, path, "exec")
            if text == original:
                raise AnchorError(f"mutation {mutation.name}: the patch leaves {path} unchanged")
        lines.append(f"{mutation.name}: {len(mutation.edits)} edit(s) in {', '.join(mutation.files)} apply")
    return lines


def show(mutation: Mutation, root: Path = REPO) -> str:
    out: list[str] = []
    for path in mutation.files:
        original = (root / path).read_text()
        text = patched_text(original, [e for e in mutation.edits if e.path == path], mutation.name)
        out += difflib.unified_diff(
            original.splitlines(keepends=True), text.splitlines(keepends=True), f"a/{path}", f"b/{path}"
        )
    return "".join(out)


# --- the scratch copy -------------------------------------------------------------------------------


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True)
    return done.stdout


def export_tree(target: Path, rev: str | None) -> str:
    """Copy the repository's files into ``target``; a description of what was copied."""
    target.mkdir(parents=True)
    if rev is not None:
        sha = _git("rev-parse", "--verify", f"{rev}^{{commit}}").strip()
        archive = subprocess.run(
            ["git", "archive", "--format=tar", sha], cwd=REPO, capture_output=True, check=True
        )
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(target, filter="data")
        return f"commit {sha[:12]}"
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    copied = 0
    for name in listed:
        source = REPO / name
        if not name or not source.is_file():  # deleted in the working tree
            continue
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)
        copied += 1
    head = _git("rev-parse", "--short=12", "HEAD").strip()
    dirty = [line for line in _git("status", "--porcelain").splitlines() if line.strip()]
    return f"working tree at {head}" + (f" with {len(dirty)} uncommitted change(s)" if dirty else "")


def imported_from(root: Path, env: dict[str, str]) -> Path:
    """Where the copy's interpreter imports ``slate_ops`` from (the editable install must not win)."""
    done = subprocess.run(
        [sys.executable, "-c", "import slate_ops, sys; sys.stdout.write(slate_ops.__file__ or '')"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout).resolve()


# --- one run ------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    outcome: str  # passed | failed (some test failed) | error (pytest could not run) | timeout
    seconds: float
    failures: list[tuple[str, float]] = field(default_factory=list)  # (test, test time so far), run order
    tests: int = 0
    tail: str = ""  # the end of pytest's output, for anything but a clean pass

    @property
    def failed(self) -> list[str]:
        return [node for node, _ in self.failures]

    def catches(self, noise: Set[str] = frozenset()) -> list[tuple[str, float]]:
        """The failures that count as catching a planted bug: none unless pytest ran to the end with
        failing tests, and never a test that also failed unpatched (``noise``)."""
        if self.outcome != "failed":
            return []
        return [(node, at) for node, at in self.failures if node not in noise]

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "outcome": self.outcome,
            "seconds": round(self.seconds, 1),
            "tests": self.tests,
            "failed": self.failed,
        }
        if self.failures:
            data["first_failed_after_s"] = round(self.failures[0][1], 1)
        if self.outcome not in ("passed", "failed"):
            data["tail"] = self.tail
        return data


def _node_id(root: Path, classname: str, name: str) -> str:
    """A pytest node id from a JUnit test case (``tests.engine.test_model.TestWriterModel``, ``runTest``)."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        module = Path(*parts[:cut]).with_suffix(".py")
        if (root / module).is_file():
            return "::".join([module.as_posix(), *parts[cut:], name])
    return f"{classname}::{name}"


def parse_junit(path: Path, root: Path) -> tuple[int, list[tuple[str, float]]]:
    """(tests run, [(failing node id, test time summed up to and including it)] in run order)."""
    if not path.is_file():
        return 0, []
    tests, failures, elapsed = 0, list[tuple[str, float]](), 0.0
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        elapsed += float(case.get("time") or 0.0)
        if case.find("skipped") is not None:
            continue
        tests += 1
        if case.find("failure") is not None or case.find("error") is not None:
            node = _node_id(root, case.get("classname", ""), case.get("name", ""))
            if node not in (n for n, _ in failures):
                failures.append((node, elapsed))
    return tests, failures


def run_proof(
    root: Path,
    proof: Sequence[str],
    junit: Path,
    *,
    timeout_s: float,
    test_timeout: int | None,
    exitfirst: bool = False,
) -> RunResult:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SLATE_OPS_"))}
    env.update(PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    where = imported_from(root, env)
    if not where.is_relative_to(root.resolve()):
        raise RuntimeError(f"the copy at {root} imports slate_ops from {where}, not from the copy")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *proof]
    if test_timeout is not None:
        command.append(f"--timeout={test_timeout}")
    if exitfirst:
        command.append("-x")
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: a timeout stops pytest and its children
    )
    try:
        output, _ = process.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        timed_out = True
    seconds = time.monotonic() - started
    tests, failures = parse_junit(junit, root)
    tail = "\n".join(output.splitlines()[-25:])
    if timed_out:
        outcome = "timeout"
    elif process.returncode == 0:
        outcome = "passed"
    elif process.returncode == 1 and failures:
        outcome = "failed"
    else:  # 2 interrupted or collection error, 3 internal error, 4 usage, 5 nothing collected
        outcome = "error"
    return RunResult(outcome, seconds, failures, tests, "" if outcome == "passed" else tail)


# --- the whole check --------------------------------------------------------------------------------


@dataclass
class Verdict:
    name: str
    plants: str
    files: list[str]
    runs: list[RunResult]
    expect_caught: bool
    noise: Set[str] = frozenset()  # tests that failed unpatched: they catch nothing

    @property
    def caught(self) -> int:
        return sum(1 for r in self.runs if r.catches(self.noise))

    @property
    def ok(self) -> bool:
        if self.expect_caught:
            return self.caught == len(self.runs)
        return all(r.outcome == "passed" for r in self.runs)

    def first_caught_by(self) -> str | None:
        """The test that failed first, over the runs (ties: the first such test in run order)."""
        firsts = Counter(r.catches(self.noise)[0][0] for r in self.runs if r.catches(self.noise))
        return firsts.most_common(1)[0][0] if firsts else None

    def to_json(self) -> dict[str, Any]:
        caught_by = Counter(node for r in self.runs for node, _ in r.catches(self.noise))
        catches = [r.catches(self.noise)[0][1] for r in self.runs if r.catches(self.noise)]
        return {
            "name": self.name,
            "plants": self.plants,
            "files": self.files,
            "runs": len(self.runs),
            "caught": self.caught,
            "passed": sum(r.outcome == "passed" for r in self.runs),
            "ok": self.ok,
            "first_caught_by": self.first_caught_by(),
            "caught_by": dict(sorted(caught_by.items(), key=lambda item: (-item[1], item[0]))),
            "seconds_per_run": round(sum(r.seconds for r in self.runs) / max(1, len(self.runs)), 1),
            "seconds_to_first_failure": round(max(catches), 1) if catches else None,
            "ignored": sorted({n for r in self.runs for n in r.failed if n in self.noise}),
            "details": [r.to_json() for r in self.runs],
        }


def _load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def run_all(
    mutations: Sequence[Mutation],
    *,
    runs: int,
    rev: str | None,
    baseline: bool,
    timeout_s: float,
    test_timeout: int | None,
    keep: bool,
    progress: Callable[[str], None],
    tests: Sequence[str] = (),
    exitfirst: bool = False,
) -> dict[str, Any]:
    started_at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    load_start = _load_average()
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="slate-ops-mutations-"))
    try:
        base = scratch / "base"
        source = export_tree(base, rev)
        for checked in mutations:  # every anchor before any run: fail in seconds, not after an hour
            for path in checked.files:
                if not (base / path).is_file():
                    raise AnchorError(f"mutation {checked.name}: {path} is not in the copy ({source})")
                patched_text(
                    (base / path).read_text(),
                    [e for e in checked.edits if e.path == path],
                    f"mutation {checked.name}",
                )
        proof = list(tests) or [p for p in PROOF if (base / p).is_file()]
        progress(f"copied {source} to {scratch}; proof: {' '.join(proof)}")
        plan: list[tuple[str, str, Mutation | None]] = []
        if baseline:
            plan.append(("baseline", "nothing: the unpatched copy", None))
        plan += [(m.name, m.plants, m) for m in mutations]
        verdicts: list[Verdict] = []
        noise: set[str] = set()  # tests that fail unpatched
        for name, plants, mutation in plan:
            results: list[RunResult] = []
            for attempt in range(1, runs + 1):
                copy = scratch / f"{name}-{attempt}"
                shutil.copytree(base, copy, symlinks=True)
                if mutation is not None:
                    plant(mutation, copy)
                result = run_proof(
                    copy,
                    proof,
                    scratch / f"{name}-{attempt}.xml",
                    timeout_s=timeout_s,
                    test_timeout=test_timeout,
                    exitfirst=exitfirst and mutation is not None,  # the baseline always runs whole
                )
                results.append(result)
                if mutation is None:
                    noise.update(result.failed)
                    verdict = result.outcome.upper()
                    first = f": {', '.join(result.failed)}" if result.failed else ""
                else:
                    catches = result.catches(noise)
                    verdict = "CAUGHT" if catches else "MISSED" if result.outcome != "error" else "ERROR"
                    first = f" first by {catches[0][0]}" if catches else ""
                progress(f"  {name} run {attempt}/{runs}: {verdict} in {result.seconds:.0f}s{first}")
                if result.outcome in ("error", "timeout"):
                    progress("    " + result.tail.replace("\n", "\n    "))
                if not keep:
                    shutil.rmtree(copy, ignore_errors=True)
            files = [] if mutation is None else mutation.files
            verdicts.append(Verdict(name, plants, files, results, mutation is not None, frozenset(noise)))
    finally:
        if keep:
            progress(f"kept the copies in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    base_verdict = next((v for v in verdicts if not v.expect_caught), None)
    planted = [v for v in verdicts if v.expect_caught]
    return {
        "command": COMMAND,
        "source": source,
        "started": started_at,
        "seconds": round(time.monotonic() - started, 1),
        "runs_per_mutation": runs,
        "exitfirst": exitfirst,
        "proof": proof,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_start": load_start,
            "load_average_end": _load_average(),
        },
        "baseline": None if base_verdict is None else base_verdict.to_json(),
        "mutations": [v.to_json() for v in planted],
        "ok": all(v.ok for v in verdicts),
    }


def table(result: dict[str, Any]) -> str:
    lines = []
    base = result.get("baseline")
    if base is not None:
        lines.append(
            f"baseline (unpatched): passed {base['passed']}/{base['runs']}, "
            f"{base['seconds_per_run']:.0f}s per run"
            + (f"; failing unpatched: {', '.join(base['ignored'])}" if base["ignored"] else "")
        )
    for m in result["mutations"]:
        first = m["first_caught_by"] or "-"
        lines.append(
            f"{m['name']:<32} caught {m['caught']}/{m['runs']}  "
            f"{m['seconds_per_run']:>5.0f}s/run  first: {first}"
        )
    lines.append(f"{'OK' if result['ok'] else 'FAILED'} in {result['seconds']:.0f}s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=2, help="runs of the proof per mutation (default 2)")
    parser.add_argument("--only", action="append", default=[], help="a mutation to plant (repeatable)")
    parser.add_argument("--rev", help="copy this commit (git archive) instead of the working tree")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unpatched runs")
    parser.add_argument("--baseline-only", action="store_true", help="only the unpatched runs")
    parser.add_argument("--output", type=Path, default=RESULTS, help=f"the result file (default {RESULTS})")
    parser.add_argument("--no-output", action="store_true", help="write no result file")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds one proof run may take")
    parser.add_argument("--test-timeout", type=int, help="pytest-timeout per test (default: pyproject's)")
    parser.add_argument(
        "--tests",
        nargs="+",
        default=[],
        metavar="TEST",
        help="run these pytest arguments instead of the proof",
    )
    parser.add_argument(
        "--exitfirst",
        action="store_true",
        help="stop a planted run at its first failing test (pytest -x): the verdict is the same, the "
        "tests that caught it are only the first; the baseline still runs whole",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch copies")
    parser.add_argument("--check", action="store_true", help="only check that every patch applies")
    parser.add_argument("--list", action="store_true", help="list the mutations")
    parser.add_argument("--show", metavar="NAME", help="print a mutation's patch as a diff")
    args = parser.parse_args(argv)

    if args.list:
        for m in MUTATIONS:
            print(f"{m.name}: {m.plants} ({', '.join(m.files)})")
        return 0
    if args.show:
        if args.show not in BY_NAME:
            parser.error(f"unknown mutation {args.show!r}; --list names them")
        print(show(BY_NAME[args.show]), end="")
        return 0
    if args.check:
        print("\n".join(check_all()))
        return 0
    unknown = [n for n in args.only if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown mutation(s) {', '.join(unknown)}; --list names them")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    chosen = [] if args.baseline_only else [m for m in MUTATIONS if not args.only or m.name in args.only]
    if args.baseline_only and args.no_baseline:
        parser.error("--baseline-only and --no-baseline leave nothing to run")
    result = run_all(
        chosen,
        runs=args.runs,
        rev=args.rev,
        baseline=not args.no_baseline,
        timeout_s=args.timeout,
        test_timeout=args.test_timeout,
        keep=args.keep,
        tests=args.tests,
        exitfirst=args.exitfirst,
        progress=lambda line: print(line, flush=True),
    )
    result["command"] = " ".join([COMMAND, *(argv if argv is not None else sys.argv[1:])])
    print(table(result))
    if not args.no_output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.output.with_name(args.output.name + ".tmp")
        tmp.write_text(json.dumps(result, indent=1) + "\n")
        tmp.replace(args.output)
        print(f"wrote {args.output}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
