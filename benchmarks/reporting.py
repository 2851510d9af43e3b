"""What every benchmark's report is made of: Markdown tables."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["markdown_table"]

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
