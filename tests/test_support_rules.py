"""The rules of test support (README.md, "Tests"): fixtures come from tests/support/ through the root
conftest's ``pytest_plugins``, never from importing a conftest; a fixture's name says what it is,
so two files never define different fixtures under one name (but for the overrides listed here)."""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cache
from pathlib import Path

TESTS = Path(__file__).parent

OVERRIDES: dict[str, str] = {
    "clock": "tests/support/clock.py's manual clock; a module whose tests need another date overrides "
    "it, and the fixtures built on it (clocked_memory_store) follow",
    "config": "tests/orchestration/conftest.py's two-database fleet config; a module that needs more "
    "databases (clones, shards, a tag policy) overrides it, and the slate and defs fixtures follow",
}
"""Fixture names defined in more than one file on purpose (pytest's override by a nearer
definition), each with the reason."""


@cache
def parsed() -> dict[Path, ast.Module]:
    """Every Python file under tests/, parsed once."""
    return {path: ast.parse(path.read_text()) for path in sorted(TESTS.rglob("*.py"))}


def imported_modules(tree: ast.Module) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            modules.add("." * node.level + node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    return modules


def fixture_names(tree: ast.Module) -> list[str]:
    """The names of the fixtures a module defines (``@pytest.fixture``, ``name=`` honoured)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            target = call.func if call is not None else decorator
            if ast.unparse(target) not in ("pytest.fixture", "fixture"):
                continue
            alias = [k.value for k in (call.keywords if call else []) if k.arg == "name"]
            names.append(str(alias[0].value) if alias and isinstance(alias[0], ast.Constant) else node.name)
    return names


def test_no_module_imports_a_conftest() -> None:
    offenders = [
        f"{path.relative_to(TESTS.parent)} imports {module}"
        for path, tree in parsed().items()
        for module in sorted(imported_modules(tree))
        if module.split(".")[-1] == "conftest"
    ]
    assert offenders == []


def test_no_fixture_is_imported() -> None:
    """A fixture reaches a test by name (a plugin, a conftest, its own module), never by being
    imported into the test's module to keep it visible."""
    fixtures_of = {
        ".".join(path.relative_to(TESTS.parent).with_suffix("").parts): set(fixture_names(tree))
        for path, tree in parsed().items()
    }
    offenders = [
        f"{path.relative_to(TESTS.parent)} imports fixture {node.module}.{alias.name}"
        for path, tree in parsed().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in fixtures_of
        for alias in node.names
        if alias.name in fixtures_of[node.module]
    ]
    assert offenders == []


def test_no_fixture_name_is_defined_twice() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path, tree in parsed().items():
        for name in fixture_names(tree):
            where[name].append(str(path.relative_to(TESTS.parent)))
    duplicates = {name: files for name, files in where.items() if len(files) > 1 and name not in OVERRIDES}
    assert duplicates == {}


def test_every_listed_override_is_still_one() -> None:
    """An override that stopped being one (its other definitions gone) leaves the list."""
    counts: dict[str, int] = defaultdict(int)
    for tree in parsed().values():
        for name in set(fixture_names(tree)):
            counts[name] += 1
    assert [name for name in OVERRIDES if counts[name] < 2] == []


def test_the_checks_see_what_they_check() -> None:
    """The two detectors find a conftest import and a fixture, so an empty result above means
    something."""
    tree = ast.parse(
        "import pytest\nfrom tests.engine.conftest import quiet\n"
        "@pytest.fixture(name='renamed')\ndef f(): ...\n@pytest.fixture\ndef store(): ...\n"
    )
    assert "tests.engine.conftest" in imported_modules(tree)
    assert fixture_names(tree) == ["renamed", "store"]
