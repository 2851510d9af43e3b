"""What every benchmark shares at its end: Markdown tables, its command line, its report file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = [
    "LOAD_COLUMN",
    "LOAD_RULE",
    "argument_parser",
    "command_line",
    "load_cell",
    "markdown_table",
    "output",
    "publish",
    "write_text",
]

_SEPARATORS = {"l": "---", "r": "--:", "c": ":-:"}


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]], align: str) -> str:
    """A GitHub Markdown table: ``header``, then one line per row of cells (``str()`` of each).

    ``align`` has one letter per column: ``l`` left, ``r`` right, ``c`` centred. A ``|`` in a cell
    is escaped and a line break becomes a space, so a cell never splits the table.
    """
    if len(align) != len(header) or set(align) - set(_SEPARATORS):
        raise ValueError(f"align {align!r} needs one of l, r, c for each of {len(header)} columns")
    lines = [_line(header), "|" + "|".join(_SEPARATORS[a] for a in align) + "|"]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"a row of {len(row)} cells in a table of {len(header)} columns: {row!r}")
        lines.append(_line(row))
    return "\n".join(lines)


def _line(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


LOAD_COLUMN = "load (1 min)"
LOAD_RULE = (
    f"The {LOAD_COLUMN} column is the machine's 1-minute load average (other processes share its "
    "CPUs): where one value is shown, when that figure's own measurement started; where two "
    "(start → end), at the start and end of its benchmark's run."
)


def load_cell(own: float | None, start: Sequence[float], end: Sequence[float]) -> str:
    """A summary row's load average: its own measurement's (``own``) if the benchmark took one, else
    the 1-minute load at its benchmark's ``start`` and ``end`` (``os.getloadavg()`` triples)."""
    if own is not None:
        return f"{own:.2f}"
    if not start or not end:
        return "n/a"
    return f"{start[0]:.2f} → {end[0]:.2f}"


def argument_parser(doc: str | None, results: Path, quick: str | None = None) -> argparse.ArgumentParser:
    """A benchmark's command line, described by the first paragraph of its module docstring, with
    ``--output`` (its results file, by default ``results``) and, where ``quick`` says what it does,
    ``--quick``, which writes no results file unless ``--output`` is given. See :func:`output`."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0] if doc else None)
    if quick is not None:
        parser.add_argument("--quick", action="store_true", help=f"{quick}; no results file")
    unless = ", not with --quick" if quick is not None else ""
    parser.add_argument("--output", type=Path, help=f"results file (default {results}{unless})")
    parser.set_defaults(default_output=results)
    return parser


def output(args: argparse.Namespace) -> Path | None:
    """Where the results of a run parsed by :func:`argument_parser` go (None: nowhere)."""
    if args.output is not None:
        return Path(args.output)
    return None if getattr(args, "quick", False) else Path(args.default_output)


def command_line(module: str, argv: Sequence[str] | None) -> str:
    """How a benchmark run alone was started: ``python -m <module>`` and its arguments (``argv``,
    else this process's)."""
    return " ".join([f"python -m {module}", *(sys.argv[1:] if argv is None else argv)])


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` atomically (a reader never sees half a file), creating its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def publish(report: str, output: Path | None, file_text: str | None = None) -> None:
    """The end of a benchmark run alone: print ``report``; unless ``output`` is None, write it (or
    ``file_text``, e.g. the same results as JSON) to ``output`` and say so on stderr."""
    text = report if report.endswith("\n") else report + "\n"
    sys.stdout.write(text)
    sys.stdout.flush()
    if output is not None:
        write_text(output, text if file_text is None else file_text)
        print(f"wrote {output}", file=sys.stderr)
