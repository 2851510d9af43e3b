"""Tests and benchmarks use no private member of a slate_ops class (issue 22).

The private names are those slate_ops defines: methods ``def _x`` in its classes and attributes
``self._x``. A test or benchmark that reads, writes or patches one of them (``obj._x``,
``getattr/setattr(obj, "_x")``, ``monkeypatch.setattr(obj, "_x", ...)``) couples itself to an
implementation detail; it should use the public API or the writer's test seam
(``Db.open(..., background=False)``, ``step()``, ``crash()``; docs/design/engine.md, "The test seam").
``self._x`` and ``cls._x`` are the test's own class's members and are not counted.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATCHERS = {"setattr", "getattr", "hasattr", "delattr"}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_names(package: Path) -> set[str]:
    """Every private method and ``self._x`` attribute defined by a class under ``package``."""
    names: set[str] = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
            for node in ast.walk(cls):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _is_private(node.name):
                    names.add(node.name)
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                    and _is_private(node.attr)
                ):
                    names.add(node.attr)
    return names


def private_uses(tree: ast.AST, names: set[str]) -> Iterator[tuple[int, str]]:
    """``(line, name)`` of each use of one of ``names`` on an object other than ``self``/``cls``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in names:
            if not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}):
                yield node.lineno, node.attr
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            func = node.func
            called = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            name = node.args[1]
            if (
                called in PATCHERS
                and isinstance(name, ast.Constant)
                and isinstance(name.value, str)
                and name.value in names
            ):
                yield node.lineno, name.value


def scan(root: Path, folders: tuple[str, ...]) -> list[str]:
    """``file:line name`` for every private-member use under ``folders`` of ``root``."""
    names = private_names(root / "slate_ops")
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            found += [f"{path.relative_to(root)}:{line} {name}" for line, name in private_uses(tree, names)]
    return found


def test_no_test_or_benchmark_uses_a_private_member_of_slate_ops() -> None:
    found = scan(ROOT, ("tests", "benchmarks"))
    assert not found, f"{len(found)} uses of slate_ops private members:\n" + "\n".join(found)


def test_the_scan_finds_attribute_and_patched_uses() -> None:
    """The rule bites: the forms it must catch are caught; ``self._x``, ``cls._x`` and names slate_ops
    does not define are not."""
    source = (
        "db._wal.write_queued()\n"
        "monkeypatch.setattr(db, '_wal', f)\n"
        "getattr(db, '_wal')\n"
        "self._wal\n"
        "cls._wal\n"
        "db._not_a_slate_ops_name\n"
    )
    names = private_names(ROOT / "slate_ops")
    assert "_wal" in names and "_write_lock" in names and "__init__" not in names
    assert sorted(private_uses(ast.parse(source), names)) == [(1, "_wal"), (2, "_wal"), (3, "_wal")]
