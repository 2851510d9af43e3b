"""Plain-JSON views of slate_ops values, for tests that compare reports field by field (across engines,
or against a dataclass's fields). The CLI has its own conventions (``slate_ops.cli.output.jsonable``:
keys as keytext, Unix times with ISO twins); this view only makes values JSON-able.

Bytes (keys) are rendered as lowercase hex, ULIDs and UUIDs as their canonical strings,
datetimes in ISO 8601.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel
from ulid import ULID

from slate_ops.config import format_duration


def to_jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, ULID | uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, BaseModel):
        return to_jsonable(value.model_dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    raise TypeError(f"cannot render {type(value).__name__} as JSON")
