"""WriteBatch: puts and deletes applied atomically with one sequence number."""

from __future__ import annotations

from slate_ops.errors import InvalidArgumentError
from slate_ops.keytext import render_bytes

KIND_VALUE = 0
KIND_TOMBSTONE = 1


def check_key(key: object) -> bytes:
    if type(key) is not bytes:
        if not isinstance(key, bytes | bytearray | memoryview):
            raise InvalidArgumentError(
                f"keys must be bytes, got {type(key).__name__} {_short(key)}; encode text keys, e.g. "
                "key.encode()"
            )
        key = bytes(key)
    if not key:
        raise InvalidArgumentError("keys must not be empty: use a key of at least one byte")
    return key


def check_value(value: object) -> bytes:
    if type(value) is not bytes:
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        raise InvalidArgumentError(
            f"values must be bytes, got {type(value).__name__} {_short(value)}; encode text values, e.g. "
            "value.encode() (delete a key with delete(), not a None value)"
        )
    return value


def check_range(start: object, end: object) -> tuple[bytes | None, bytes | None]:
    """Scan bounds ``[start, end)`` (None: unbounded) as bytes; ``start > end`` is refused.

    ``start == end`` is an empty range, not an error, as for ``range(n, n)``.
    """
    first = None if start is None else check_key(start)
    last = None if end is None else check_key(end)
    if first is not None and last is not None and first > last:
        raise InvalidArgumentError(
            f"scan start {render_bytes(first)} is after its end {render_bytes(last)}; the range is "
            "[start, end): swap them"
        )
    return first, last


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class WriteBatch:
    """A list of puts and deletes; :meth:`Db.write` applies them all or none.

    Within a batch, a later operation on the same key wins.
    """

    def __init__(self) -> None:
        self.ops: list[tuple[bytes, int, bytes]] = []

    def put(self, key: bytes, value: bytes) -> WriteBatch:
        self.ops.append((check_key(key), KIND_VALUE, check_value(value)))
        return self

    def delete(self, key: bytes) -> WriteBatch:
        self.ops.append((check_key(key), KIND_TOMBSTONE, b""))
        return self

    def __len__(self) -> int:
        return len(self.ops)
