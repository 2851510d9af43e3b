"""The simulation's structure (issue 22): its actors and checks talk through the public
:class:`~tests.reliability.sim.context.SimContext` (the adversary's through
:class:`~tests.reliability.sim.adversary.context.AdvContext`), never through another class's private
members."""

from __future__ import annotations

import ast
from pathlib import Path

SIM = Path(__file__).parent / "sim"
ADVERSARY = SIM / "adversary"
MAX_ADVERSARY_MODULE_LINES = 400
FILES = [Path(__file__).parent / "simulation.py", *sorted(SIM.rglob("*.py"))]


def private_reaches(source: str) -> list[str]:
    """``x._y`` where ``x`` is not ``self`` or ``cls``: a private member of another object."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        if not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_check_finds_a_private_reach() -> None:
    assert private_reaches("class A:\n    def f(self, sim):\n        return sim._outcome(self._x)\n") == [
        "line 3: sim._outcome"
    ]


def test_the_simulation_reaches_no_private_member_of_another_object() -> None:
    assert len(FILES) > 10
    reaches = {f"{p.relative_to(SIM.parent)} {r}" for p in FILES for r in private_reaches(p.read_text())}
    assert not reaches, sorted(reaches)


def test_every_actor_receives_the_context() -> None:
    """Each actor class is built from a SimContext alone (no actor holds the scheduler)."""
    for path in sorted((SIM / "actors").glob("*.py")):
        tree = ast.parse(path.read_text())
        for cls in (
            n for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith(("Actor", "Lifecycle"))
        ):
            init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
            annotations = [ast.unparse(a.annotation) for a in init.args.args[1:] if a.annotation is not None]
            assert annotations == ["SimContext"], (path.name, cls.name, annotations)


def _init_annotations(cls: ast.ClassDef) -> list[str]:
    init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    return [ast.unparse(a.annotation) for a in init.args.args[1:] if a.annotation is not None]


def test_every_adversary_part_receives_the_context() -> None:
    """The adversary's actors, moves, writer sessions and invariants are built from an AdvContext
    alone; only the scheduler builds them (from the configuration)."""
    parts = {}
    for path in sorted(ADVERSARY.glob("*.py")):
        for cls in (n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef)):
            if any(isinstance(f, ast.FunctionDef) and f.name == "__init__" for f in cls.body):
                parts[cls.name] = (path.name, _init_annotations(cls))
    actors = [name for name in parts if name.endswith("Actor")]
    assert len(actors) >= 5, actors
    for name, (module, takes) in parts.items():
        expected = {"Adversary": ["AdvConfig"], "AdvContext": ["AdvConfig"]}.get(name, ["AdvContext"])
        assert takes == expected, (module, name, takes)


def test_the_adversary_is_split_into_small_modules() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in ADVERSARY.glob("*.py")}
    assert len(sizes) >= 8 and not (SIM / "adversary.py").exists()
    assert max(sizes.values()) <= MAX_ADVERSARY_MODULE_LINES, sizes
