"""Keys and values as text, one convention everywhere (CLI, Dagster config, reports).

Bytes that are printable UTF-8 text are written as that text; anything else (invalid UTF-8, text with
control or other non-printable characters, such as a newline or NUL) and text that itself starts
with ``hex:``, as ``hex:<lowercase hex>``. :func:`parse_bytes` reads both forms back, so any rendered
key can be pasted back as input.
"""

from __future__ import annotations

import re

HEX_PREFIX = "hex:"
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})*")


def parse_bytes(text: str) -> bytes:
    """``hex:<hex>`` as the bytes it spells, anything else as its UTF-8 encoding.

    Raises :class:`ValueError` for malformed hex. Text the OS passed as undecodable bytes comes back
    byte for byte (``surrogateescape``).
    """
    if text.startswith(HEX_PREFIX):
        digits = text[len(HEX_PREFIX) :]
        if not _HEX.fullmatch(digits):
            raise ValueError(
                f"{text!r} is not valid hex: after 'hex:' give an even number of hex digits (e.g. hex:00ff)"
            )
        return bytes.fromhex(digits)
    return text.encode("utf-8", "surrogateescape")


def render_bytes(data: bytes) -> str:
    """The inverse of :func:`parse_bytes`: printable UTF-8 text as it is, else ``hex:<hex>``.

    Printable is :meth:`str.isprintable` (spaces and non-ASCII letters are; tabs, newlines, NUL and
    other control characters are not), so a rendered key never breaks a line, a table or a message.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return HEX_PREFIX + data.hex()
    if text.startswith(HEX_PREFIX) or not text.isprintable():
        return HEX_PREFIX + data.hex()
    return text


def render_optional(data: bytes | None) -> str | None:
    """:func:`render_bytes`, keeping None (an unbounded range end, a missing value)."""
    return None if data is None else render_bytes(data)


__all__ = ["HEX_PREFIX", "parse_bytes", "render_bytes", "render_optional"]
