"""Argument types of the CLI: each turns one text into a value, or raises a usage error (exit 2)."""

from __future__ import annotations

import argparse
import re
import uuid
from datetime import timedelta

from slate_ops import keytext
from slate_ops.config import format_duration, parse_duration
from slate_ops.gc import MIN_AGE_FLOOR


def parse_bytes(text: str) -> bytes:
    """A value: text, or ``hex:<hex>`` (see :mod:`slate_ops.keytext`)."""
    try:
        return keytext.parse_bytes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parse_key(text: str) -> bytes:
    """:func:`parse_bytes` for a key: also refuses the empty key."""
    key = parse_bytes(text)
    if not key:
        raise argparse.ArgumentTypeError(
            f"{text!r} is an empty key; keys are at least one byte (text, or hex:<hex> such as hex:00)"
        )
    return key


def positive_int(text: str) -> int:
    """A count: an integer >= 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def count(text: str) -> int:
    """A count that may be zero: an integer >= 0."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (an integer >= 0)")
    return int(text)


def manifest_id(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a manifest id (a positive integer)")
    return int(text)


def checkpoint_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a checkpoint id (a UUID, as printed by create-checkpoint)"
        ) from None


def duration(text: str) -> timedelta:
    """A duration such as ``"7days 30min 10s"``."""
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def min_age(text: str) -> timedelta:
    """A GC minimum age: a :func:`duration` no shorter than the floor."""
    value = duration(text)
    if value < MIN_AGE_FLOOR:
        raise argparse.ArgumentTypeError(
            f"{text!r} is below the minimum age floor of {format_duration(MIN_AGE_FLOOR)} "
            "(a shorter one could delete objects a live writer or reader still needs)"
        )
    return value


_HH_MM = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")


def time_of_day(text: str) -> str:
    """``HH:MM`` in UTC."""
    if not _HH_MM.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a time of day 'HH:MM' (UTC, 00:00 to 23:59)")
    return text
