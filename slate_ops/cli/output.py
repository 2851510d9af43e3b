"""What the CLI prints: JSON (one value, or JSON lines for streams) and ``--format table``."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TextIO

from slate_ops.jsonable import to_jsonable
from slate_ops.keytext import render_bytes

__all__ = ["print_json_lines", "render", "render_bytes", "render_size", "render_table", "render_time"]


def render(value: Any, output_format: str) -> str:
    """``value`` (already JSON-able) as the text ``--format`` asks for."""
    return render_table(value) if output_format == "table" else json.dumps(value, indent=2)


def render_table(value: Any) -> str:
    """A list of dicts as aligned columns; one dict as ``key  value`` lines."""
    rows = value if isinstance(value, list) else [value]
    if not rows:
        return "(none)"
    if not all(isinstance(r, dict) for r in rows):
        return "\n".join(json.dumps(r) for r in rows)
    if not isinstance(value, list):
        width = max(len(k) for k in value)
        return "\n".join(f"{k.ljust(width)}  {_cell(v)}" for k, v in value.items())
    columns = list(dict.fromkeys(k for r in rows for k in r))
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value)


def render_time(unix_s: float | None) -> str | None:
    """Unix seconds as ISO 8601 UTC (``2026-11-23T07:30:00Z``); None stays None."""
    if unix_s is None:
        return None
    return datetime.fromtimestamp(unix_s, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def render_size(size: int) -> str:
    """Bytes for people: ``512 B``, ``1.5 KiB``, ``3.2 GiB``."""
    value = float(size)
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def print_json_lines(rows: Iterable[Any], file: TextIO | None = None) -> int:
    """Print each row as one compact JSON line; returns the number printed.

    Rows are passed through :func:`slate_ops.jsonable.to_jsonable`. A generator is closed when done
    (so a scan releases its reader even if printing stops early); a closed pipe (``| head``) ends
    the output quietly.
    """
    out = file if file is not None else sys.stdout
    count = 0
    try:
        for item in rows:
            out.write(json.dumps(to_jsonable(item)) + "\n")
            count += 1
        out.flush()
    except BrokenPipeError:
        if out is not sys.stdout:
            raise
        # Point stdout at devnull so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()
    return count
