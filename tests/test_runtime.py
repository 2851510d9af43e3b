"""The injected runtime (slate_ops/runtime.py): seeded runtimes replay, and nothing in slate_ops
goes around it (docs/design/runtime.md, "Determinism")."""

from __future__ import annotations

import ast
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from slate_ops.compaction import (
    CompactionSpec,
    Compactor,
    CompactorOptions,
    LocalExecutor,
    SourceRun,
    SourceView,
)
from slate_ops.layout import sst_key
from slate_ops.manifest.model import KeyRange
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.runtime import SYSTEM_RUNTIME, FixedNow, InlineExecutor, ManualRuntime
from tests.support.compaction import fill

ROOT = Path(__file__).resolve().parents[1]


def draws(runtime: ManualRuntime) -> list[object]:
    return [runtime.new_uuid(), runtime.new_ulid(), runtime.random().random(), runtime.new_ulid()]


def test_manual_runtimes_built_alike_hand_out_the_same_ids() -> None:
    first, second = ManualRuntime(1_000.0, seed=7), ManualRuntime(1_000.0, seed=7)
    assert draws(first) == draws(second)
    first.advance(5)
    second.advance(5)
    assert draws(first) == draws(second)
    assert draws(ManualRuntime(1_000.0, seed=8)) != draws(ManualRuntime(1_000.0, seed=7))


def test_manual_time_moves_only_when_told() -> None:
    runtime = ManualRuntime(1_000.0)
    assert runtime.now() == runtime.monotonic() == 1_000.0
    runtime.advance(2.5)
    assert runtime.now() == runtime.monotonic() == 1_002.5
    assert runtime.new_ulid().timestamp == 1_002.5
    runtime.set(50.0)
    assert runtime.now() == 50.0


def test_a_manual_runtime_runs_pooled_calls_on_the_callers_thread_at_submit() -> None:
    order: list[str] = []

    def call(name: str) -> str:
        order.append(name)
        return threading.current_thread().name

    def fail() -> None:
        raise ValueError("boom")

    with ManualRuntime().executor(16, "wal-fetch") as pool:
        assert isinstance(pool, InlineExecutor)
        first = pool.submit(call, "a")
        assert first.done() and order == ["a"]  # ran before submit returned
        assert first.result() == threading.current_thread().name
        failed = pool.submit(fail)
        assert failed.done() and isinstance(failed.exception(), ValueError)  # stored, not raised
        assert list(pool.map(call, ["b", "c"])) == [threading.current_thread().name] * 2
    assert order == ["a", "b", "c"]
    assert isinstance(FixedNow(ManualRuntime(), 1.0).executor(4, "x"), InlineExecutor)


def test_the_system_runtime_hands_out_real_thread_pools() -> None:
    with SYSTEM_RUNTIME.executor(3, "slate-ops-test") as pool:
        assert isinstance(pool, ThreadPoolExecutor)
        assert pool._max_workers == 3
        name = pool.submit(lambda: threading.current_thread().name).result()
    assert name.startswith("slate-ops-test") and name != threading.current_thread().name
    with FixedNow(SYSTEM_RUNTIME, 1.0).executor(2, "fixed") as pool:
        assert isinstance(pool, ThreadPoolExecutor)


def test_a_fixed_now_stops_the_wall_clock_but_draws_ids_from_its_base() -> None:
    base, twin = ManualRuntime(1_000.0, seed=3), ManualRuntime(1_000.0, seed=3)
    fixed = FixedNow(base, 42.0)
    base.advance(60)
    twin.advance(60)
    assert fixed.now() == 42.0
    assert fixed.monotonic() == 1_060.0
    assert [fixed.new_uuid(), fixed.new_ulid()] == [twin.new_uuid(), twin.new_ulid()]
    assert fixed.new_uuid() != FixedNow(ManualRuntime(1_000.0, seed=3), 42.0).new_uuid()


SPLIT = CompactorOptions(min_sources=2, max_subcompaction_bytes=2048, target_sst_bytes=1024)


def _compact_once(seed: int) -> tuple[str, list[str]]:
    store = MemoryStore()
    fill(store, flushes=3, keys=120)
    runtime = ManualRuntime(seed=seed)
    executor = LocalExecutor(threads=1, clock=runtime)  # one thread: the outputs are named in key order
    report = Compactor("db", store, SPLIT, executor, clock=runtime).run_once()
    assert report is not None and report.subcompactions > 1
    run = ManifestStore(store, "db").read_latest_required().value.compacted[0]
    return str(report.id), [f"{v.view_id}/{v.sst_id}" for v in run.views]


def test_a_compactor_on_a_seeded_runtime_names_everything_alike() -> None:
    """Compaction, view and output SST ids all come from the runtime: one seed, one set of names."""
    first, second = _compact_once(11), _compact_once(11)
    assert first == second
    assert _compact_once(12)[0] != first[0]


def test_running_a_compaction_again_names_new_outputs() -> None:
    """A re-run (a retried task) never overwrites what an earlier attempt left: that orphan may be
    GC's to delete at the same moment."""
    store = MemoryStore()
    fill(store, flushes=3, keys=120)
    manifest = ManifestStore(store, "db").read_latest_required().value
    sizes = {s.id: s.info.size_bytes for s in manifest.ssts}
    sources = tuple(SourceRun((SourceView(sst_key("db", v.sst_id), sizes[v.sst_id]),)) for v in manifest.l0)
    spec = CompactionSpec(
        "db", sources, drop_tombstones=True, target_sst_bytes=1024, subcompactions=(KeyRange(),)
    )
    executor = LocalExecutor(threads=1, clock=ManualRuntime(seed=5))
    first, again = executor.execute(store, spec), executor.execute(store, spec)
    assert len(first.outputs) > 1 and {s.id for s in first.outputs}.isdisjoint(s.id for s in again.outputs)


def _unseeded_ulid_calls(path: Path) -> list[int]:
    """Lines of ``ULID()`` / ``ulid.ULID()`` calls without arguments (a ULID from the OS)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if name == "ULID":
                found.append(node.lineno)
    return found


def test_slate_ops_never_makes_a_ulid_of_its_own(tmp_path: Path) -> None:
    """ruff's banned-api cannot ban ``ULID()`` without banning the type: this does."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import ulid\nfrom ulid import ULID\nx: ULID = ULID()\ny = ulid.ULID()\nz = ULID(bytes(16))\n"
    )
    assert _unseeded_ulid_calls(probe) == [3, 4]
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "slate_ops").rglob("*.py"))
        if path.name != "runtime.py"
        for line in _unseeded_ulid_calls(path)
    ]
    assert offenders == [], "make ULIDs with clock.new_ulid() (slate_ops.runtime)"


@pytest.mark.parametrize(
    "source",
    [
        "import time\nt = time.time()\n",
        "import time\nt = time.monotonic()\n",
        "from time import monotonic\n",
        "import uuid\ni = uuid.uuid4()\n",
        "import random\n",
        "from random import choice\n",
        "from ulid import ULIDGenerator\n",
        "from concurrent.futures import ThreadPoolExecutor\n",
        "import concurrent.futures\np = concurrent.futures.ThreadPoolExecutor(2)\n",
    ],
)
def test_the_lint_rule_bans_the_real_sources_in_slate_ops(source: str) -> None:
    def banned(filename: str) -> bool:
        ran = subprocess.run(
            [sys.executable, "-m", "ruff", "check", "--select", "TID251", "--stdin-filename", filename, "-"],
            input=source, cwd=ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        return "TID251" in ran.stdout

    assert banned("slate_ops/admin/example.py")
    assert not banned("slate_ops/runtime.py")  # the one place that holds them


# Patches the simulation may make: a decode memo for speed. Anything else it patched (ids, time,
# thread pools) would be a determinism it does not get from the runtime.
ALLOWED_SIM_PATCHES = {"memoized_manifest_decoding"}


def _patching_functions(path: Path) -> set[str]:
    """Names of the functions in ``path`` that call ``mock.patch...`` or ``setattr`` (``<module>``
    at the top)."""
    found: set[str] = set()

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else where
            if isinstance(child, ast.Call) and any(
                patch in ast.unparse(child.func) for patch in ("mock.patch", "setattr")
            ):
                found.add(where)
            visit(child, inner)

    visit(ast.parse(path.read_text()), "<module>")
    return found


def test_the_simulation_patches_nothing_for_ids_or_time() -> None:
    sim_files = sorted((ROOT / "tests/reliability/sim").rglob("*.py"))
    files = [ROOT / "tests/reliability/simulation.py", *sim_files]
    patching = {f"{p.name}:{name}" for p in files for name in _patching_functions(p)}
    assert {p.split(":")[1] for p in patching} <= ALLOWED_SIM_PATCHES, patching
