"""Joining a database path with the keys below it."""

from __future__ import annotations

from slate_ops.errors import InvalidArgumentError


def normalize_db_path(path: str) -> str:
    """``"/a/b/"`` → ``"a/b"``; the empty string is the store's root. Refuses ``.`` and ``..``."""
    if not isinstance(path, str):
        raise InvalidArgumentError(f"database path must be a string, got {type(path).__name__}")
    parts = [p for p in path.strip("/").split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise InvalidArgumentError(f"database path {path!r} must not contain '.' or '..'")
    return "/".join(parts)


def join(path: str, *parts: str) -> str:
    return "/".join(p for p in (path, *parts) if p)
