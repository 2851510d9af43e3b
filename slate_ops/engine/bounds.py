"""The key range a database may hold (``Manifest.visible_range``, set on the shards of a split).

docs/design/rescaling.md, "The database's key range": writes fully or partially outside the visible
range fail, and so do reads completely outside it; a scan that overlaps the range is narrowed to it.
"""

from __future__ import annotations

from collections.abc import Iterable

from slate_ops.errors import OutOfRangeError
from slate_ops.keytext import render_bytes
from slate_ops.manifest.model import KeyRange


def check_write(visible: KeyRange | None, keys: Iterable[bytes], location: str) -> None:
    """Raise :class:`OutOfRangeError` unless every key is inside ``visible`` (None: all keys)."""
    if visible is None:
        return
    for key in keys:
        if not visible.contains(key):
            raise OutOfRangeError(
                f"key {render_bytes(key)} is outside {location}'s key range {visible}; nothing was "
                "written. Write it to the shard whose range holds it"
            )


def check_read(visible: KeyRange | None, key: bytes, location: str) -> None:
    if visible is not None and not visible.contains(key):
        raise OutOfRangeError(
            f"key {render_bytes(key)} is outside {location}'s key range {visible}; read it from the "
            "shard whose range holds it"
        )


def clip_scan(
    visible: KeyRange | None, start: bytes | None, end: bytes | None, location: str
) -> tuple[bytes | None, bytes | None]:
    """The scan bounds narrowed to ``visible``; a non-empty scan entirely outside it is refused."""
    if visible is None:
        return start, end
    requested = KeyRange(start, end)
    clipped = requested.intersect(visible)
    if clipped.is_empty() and not requested.is_empty():
        raise OutOfRangeError(
            f"scan {requested} lies entirely outside {location}'s key range {visible}; scan the shard "
            "whose range holds it"
        )
    return clipped.start, clipped.end
