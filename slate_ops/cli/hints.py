"""Error messages in the CLI's words: the fixes they suggest name flags and commands, not Python.

The operator API's errors are written for Python callers as well, so a fix may name a keyword
argument (``replace=True``) or a method (``Db.flush_memtable()``), sometimes beside its CLI form
(``replace=True (--replace)``). :func:`cli_message` rewrites each known Python hint of :data:`HINTS`
into its CLI form, and drops the Python form where the message already gives the CLI one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Hint:
    python: str
    """The Python form, as it appears in a message."""
    cli: str
    """The CLI form that replaces it; ``{path}`` is the command's ``--path``."""
    given: str
    """A regex matching the CLI form where a message already gives it beside the Python one."""


HINTS: tuple[Hint, ...] = (
    Hint("replace=True", "--replace", r"--replace"),
    Hint("exist_ok=True", "--exist-ok", r"`?slate-ops [^`()]*--exist-ok`?|--exist-ok"),
    Hint("dry_run=False", "--no-dry-run", r"--no-dry-run"),
    Hint("dry_run=True", "--dry-run", r"--dry-run"),
    Hint("Db.flush_memtable()", "`slate-ops --path {path} flush`", r"`slate-ops --path \S+ flush`"),
    Hint("use create_tag", "use `slate-ops create-tag`", r"`slate-ops create-tag`"),
)


def cli_message(message: str, path: str) -> str:
    """``message`` with every Python hint of :data:`HINTS` in its CLI form.

    ``X (Y)`` and ``X, or Y``, where ``Y`` is the CLI form of the Python ``X``, become ``Y``; any other
    ``X`` becomes its CLI form.
    """
    for hint in HINTS:
        if hint.python not in message:
            continue
        python = re.escape(hint.python)
        message = re.sub(rf"{python} \(({hint.given})\)", r"\1", message)
        message = re.sub(rf"{python},? or ({hint.given})", r"\1", message)
        message = message.replace(hint.python, hint.cli.format(path=path or "PATH"))
    return message
