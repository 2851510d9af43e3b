"""What the CLI prints: JSON (one value, or JSON lines for streams) and ``--format table``.

One language for every command (docs/cli.md "Output conventions"):

- keys and values (``bytes``) as text, or ``hex:<hex>`` where they are not printable text
  (:func:`slate_ops.keytext.render_bytes`), so any key printed can be passed back as an argument;
- times in ISO 8601 UTC (``2026-11-23T07:30:00Z``): datetimes are printed so, and every Unix-seconds
  field named ``*_time_s``, ``*_at_s`` or ``*_start_s`` gets its ISO twin beside it in JSON
  (``create_time_s`` and ``create_time``); a table shows only the ISO one;
- in tables only, byte counts as ``KiB``/``MiB`` and durations (``duration_s``, ``seconds``) as
  ``384ms`` or ``2min 5s``, and a report's ``requests`` (what the operation cost in object-store
  requests) as one line, ``12 GET, 3 PUT, 2 LIST, 0 DELETE, 1 HEAD; 4.1 MB read, 0.0 MB written;
  $0.000030``; JSON keeps the numbers.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, TextIO

from pydantic import BaseModel
from ulid import ULID

from slate_ops.clock import render_utc
from slate_ops.config import format_duration
from slate_ops.keytext import render_bytes
from slate_ops.objstore.metering import KINDS, RequestCounts, render_requests

__all__ = [
    "is_duration_field",
    "is_size_field",
    "is_time_field",
    "jsonable",
    "print_json_lines",
    "render",
    "render_bytes",
    "render_duration",
    "render_size",
    "render_table",
    "render_time",
    "with_iso_times",
]


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON in the CLI's conventions: bytes as keytext, datetimes as ISO 8601 UTC,
    ULIDs and UUIDs as strings, durations as ``"7days 30min"``; every Unix time gets its ISO twin
    (:func:`with_iso_times`). Idempotent: already plain JSON passes through (twins are not doubled).
    """
    return with_iso_times(_plain(value))


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes):
        return render_bytes(value)
    if isinstance(value, datetime):
        return render_time(value)
    if isinstance(value, ULID | uuid.UUID):
        return str(value)
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, BaseModel):
        return _plain(value.model_dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    raise TypeError(f"cannot render {type(value).__name__} as JSON")


# --- times ----------------------------------------------------------------------------------------


def is_time_field(name: str) -> bool:
    """A field holding Unix seconds: ``*_time_s``, ``*_at_s``, ``*_start_s`` (or ``at_s``).

    Other ``*_s`` fields are durations (``duration_s``, ``grace_s``) and are left alone.
    """
    return name == "at_s" or name.endswith(("_time_s", "_at_s", "_start_s"))


def with_iso_times(value: Any) -> Any:
    """Plain JSON ``value`` with ``name`` (ISO 8601 UTC, or None) inserted after every Unix-time field
    ``name_s`` (:func:`is_time_field`), at any depth, unless ``name`` is already there.

    A stored ``0`` means unset in the manifest (a checkpoint that never expires), so it maps to None.
    """
    if isinstance(value, list):
        return [with_iso_times(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        out[key] = with_iso_times(item)
        twin = key[:-2]
        if is_time_field(key) and twin not in value and _is_seconds(item):
            out[twin] = render_time(item) if item else None
    return out


def _is_seconds(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def render_time(when: float | datetime | None) -> str | None:
    """Unix seconds or a datetime as ISO 8601 UTC to the second (``2026-11-23T07:30:00Z``); None stays
    None. A naive datetime is taken to be UTC."""
    return None if when is None else render_utc(when)


# --- sizes and durations (tables) -----------------------------------------------------------------

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def render_size(size: int) -> str:
    """Bytes for people: ``512 B``, ``1.5 KiB``, ``3.2 GiB``."""
    value = float(size)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def render_duration(seconds: float) -> str:
    """A duration for people: ``384ms``, ``2.35s``, ``2min 5s``, ``1days 3h``."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:.2f}s"
    return format_duration(timedelta(seconds=round(seconds)))


def is_size_field(name: str) -> bool:
    """A byte count: ``bytes``, ``size``, ``*_bytes``, ``bytes_*`` (``size_bytes``, ``bytes_read``)."""
    return name in ("bytes", "size") or name.endswith("_bytes") or name.startswith("bytes_")


def is_duration_field(name: str) -> bool:
    """A duration in seconds: ``duration_s``, ``*_duration_s``, ``seconds``."""
    return name in ("duration_s", "seconds") or name.endswith("_duration_s")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def for_people(value: Any) -> Any:
    """Plain JSON ``value`` as a table shows it: Unix-time fields left out where their ISO twin is
    present, byte counts as ``KiB``/``MiB``, durations as ``384ms``/``2min 5s``, at any depth."""
    if isinstance(value, list):
        return [for_people(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if is_time_field(key) and key[:-2] in value:
            continue
        if key == "requests" and isinstance(item, dict) and set(KINDS) <= item.keys():
            out[key] = render_requests(RequestCounts.from_dict(item))
        elif is_size_field(key) and isinstance(item, int) and not isinstance(item, bool):
            out[key] = render_size(item)
        elif is_duration_field(key) and _is_number(item):
            out[key] = render_duration(item)
        else:
            out[key] = for_people(item)
    return out


# --- rendering ------------------------------------------------------------------------------------


def render(value: Any, output_format: str) -> str:
    """``value`` (already JSON-able, see :func:`jsonable`) as the text ``--format`` asks for."""
    if output_format == "table":
        return render_table(for_people(value))
    return json.dumps(value, indent=2)


def render_table(value: Any) -> str:
    """A list of dicts as aligned columns; one dict as ``key  value`` lines."""
    rows = value if isinstance(value, list) else [value]
    if not rows:
        return "(none)"
    if not all(isinstance(r, dict) for r in rows):
        return "\n".join(json.dumps(r) for r in rows)
    if not isinstance(value, list):
        width = max((len(k) for k in value), default=0)
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
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ", ".join(value) if value else "-"
    return value if isinstance(value, str) else json.dumps(value)


def print_json_lines(rows: Iterable[Any], file: TextIO | None = None) -> int:
    """Print each row as one compact JSON line; returns the number printed.

    Rows are passed through :func:`jsonable`. A generator is closed when done (so a scan releases its
    reader even if printing stops early); a closed pipe (``| head``) ends the output quietly.
    """
    out = file if file is not None else sys.stdout
    count = 0
    try:
        for item in rows:
            out.write(json.dumps(jsonable(item)) + "\n")
            count += 1
        out.flush()
    except BrokenPipeError:
        if out is not sys.stdout:
            raise
        _quiet_stdout()
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()
    return count


def print_value(text: str) -> None:
    """Print one rendered value; a closed pipe (``| head``) ends the output quietly."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()


def _quiet_stdout() -> None:
    # Point stdout at devnull so the interpreter's final flush does not raise again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
