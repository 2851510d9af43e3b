"""No private member is reached from outside its owner (issue 22).

Tests and benchmarks use no private member of a slate_ops class; inside slate_ops, no module reads
another object's private member (``expr._x`` where ``expr`` is not ``self``/``cls``/``super()``)
except the few external APIs of :data:`EXTERNAL_PRIVATE_API`: what one module needs of another is a
public attribute, property or method, or is passed as an argument.

Tests and benchmarks:

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


EXTERNAL_PRIVATE_API = {
    "_tab": "FlatBuffers: a generated table's buffer; the generated classes offer no public one",
    "_replace": "namedtuple: its public copy-with-changes method (underscored against field clashes)",
    "_actions": "argparse: a parser's options, for did-you-mean hints; argparse has no public list",
    "_jsc": "PySpark: the JavaSparkContext, for the executor count; PySpark has no public one",
    "_get_credentials": "botocore: a client's resolved credentials, handed to SlateDB's binding",
    "_request_signer": "botocore (older): the signer holding the credentials, as above",
    "_credentials": "botocore (older): the signer's credentials, as above",
}
"""Private names of other libraries' objects that slate_ops may use, each with why it must."""


def _is_own(node: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object's own members."""
    if isinstance(node, ast.Name):
        return node.id in {"self", "cls"}
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def foreign_private_uses(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """``(line, name)`` of each private member (any ``_x``, not a dunder) read, written or
    get/set/has/delattr'd on an object other than ``self``/``cls``/``super()``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr) and not _is_own(node.value):
            yield node.lineno, node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in PATCHERS
            and len(node.args) >= 2
            and not _is_own(node.args[0])
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _is_private(node.args[1].value)
        ):
            yield node.lineno, node.args[1].value


def scan_package(root: Path) -> list[str]:
    """``file:line name`` for every private member slate_ops reaches on another object, except
    :data:`EXTERNAL_PRIVATE_API` (generated FlatBuffers code, ``_generated/``, is not ours to change)."""
    found = []
    for path in sorted((root / "slate_ops").rglob("*.py")):
        if "_generated" in path.parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        found += [
            f"{path.relative_to(root)}:{line} {name}"
            for line, name in foreign_private_uses(tree)
            if name not in EXTERNAL_PRIVATE_API
        ]
    return found


def test_no_slate_ops_module_reaches_into_another_objects_private_members() -> None:
    found = scan_package(ROOT)
    assert not found, (
        f"{len(found)} private members reached from outside their owner (make it a public attribute, "
        "property or method, pass it as an argument, or move the code into the owning class; an "
        "external library's API goes in EXTERNAL_PRIVATE_API with its reason):\n" + "\n".join(found)
    )


def test_the_package_scan_finds_foreign_private_uses() -> None:
    """The rule bites: another object's private member (read, written, called, via getattr) is
    caught, on a name, an attribute chain or a call result; ``self``/``cls``/``super()`` and
    dunders are not."""
    source = (
        "handle._manifest()\n"
        "self.gc._store\n"
        "make()._x = 1\n"
        "getattr(store, '_prefix', '')\n"
        "self._own\n"
        "cls._own\n"
        "super()._own()\n"
        "getattr(self, '_own', None)\n"
        "obj.__class__\n"
        "obj.public\n"
    )
    assert sorted(foreign_private_uses(ast.parse(source))) == [
        (1, "_manifest"),
        (2, "_store"),
        (3, "_x"),
        (4, "_prefix"),
    ]


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
