"""encode_sst refuses what it cannot encode faithfully: wrong order, nulls, bad kinds, bad options."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from slate_ops.errors import InvalidArgumentError
from slate_ops.sst import SCHEMA, SstOptions, encode_sst, entries_to_table


def table(rows: list[tuple[bytes, int, int, bytes]]) -> pa.Table:
    return entries_to_table(rows)


@pytest.mark.parametrize(
    "rows",
    [
        [(b"b", 1, 0, b""), (b"a", 1, 0, b"")],  # keys descending
        [(b"a", 1, 0, b""), (b"a", 2, 0, b"")],  # seqs ascending within a key
        [(b"a", 1, 0, b""), (b"a", 1, 0, b"")],  # duplicate (key, seq)
        [(b"a\x00", 1, 0, b""), (b"a", 1, 0, b"")],  # a longer key sorts after its prefix
        [(b"\xff", 1, 0, b""), (b"\x00", 1, 0, b"")],  # bytes compare unsigned
        [*((b"%05d" % i, 1, 0, b"") for i in range(1000)), (b"00500", 1, 0, b"")],  # late violation
    ],
)
def test_key_order_violations_are_refused(rows: list[tuple[bytes, int, int, bytes]]) -> None:
    with pytest.raises(InvalidArgumentError, match="out of order"):
        encode_sst(table(rows))


def test_violation_message_names_the_rows() -> None:
    rows = [(b"a", 1, 0, b""), (b"c", 1, 0, b""), (b"b", 1, 0, b"")]
    with pytest.raises(InvalidArgumentError, match="rows 1 and 2"):
        encode_sst(table(rows))


def test_seq_order_checks_seqs_only() -> None:
    encode_sst(table([(b"b", 1, 0, b""), (b"a", 1, 0, b""), (b"b", 2, 1, b"")]), order="seq")
    with pytest.raises(InvalidArgumentError, match="non-decreasing"):
        encode_sst(table([(b"a", 2, 0, b""), (b"b", 1, 0, b"")]), order="seq")
    with pytest.raises(InvalidArgumentError):  # a key-ordered file must not take the WAL's order
        encode_sst(table([(b"b", 1, 0, b""), (b"a", 2, 0, b"")]), order="key")


@pytest.mark.parametrize(
    ("column", "values"),
    [
        ("key", pa.array([b"a", None], pa.binary())),
        ("seq", pa.array([2, None], pa.uint64())),
        ("kind", pa.array([0, None], pa.uint8())),
        ("value", pa.array([b"v", None], pa.binary())),
    ],
)
def test_nulls_are_refused(column: str, values: pa.Array) -> None:
    data: dict[str, Any] = {"key": [b"a", b"b"], "seq": [2, 1], "kind": [0, 0], "value": [b"v", b"w"]}
    data[column] = values
    with pytest.raises(InvalidArgumentError, match="null"):
        encode_sst(pa.table(data))


def test_bad_values_and_columns_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="kind"):
        encode_sst(table([(b"a", 1, 2, b"")]))
    with pytest.raises(InvalidArgumentError, match="seq"):
        encode_sst(pa.table({"key": [b"a"], "seq": [-1], "kind": [0], "value": [b""]}))
    with pytest.raises(InvalidArgumentError, match="columns"):
        encode_sst(pa.table({"key": [b"a"], "seq": [1]}))
    with pytest.raises(InvalidArgumentError):
        encode_sst([(b"a", 1, 0, b"")])
    with pytest.raises(InvalidArgumentError, match="order"):
        encode_sst(table([]), order="wal")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        entries_to_table([(1, 1, 0, b"")])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "kwargs",
    [{"block_size": 0}, {"block_size": 10}, {"compression": "gzip"}, {"bloom_bits_per_key": -1}],
)
def test_bad_options_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        SstOptions(**kwargs)


def test_an_empty_table_is_a_valid_empty_sst() -> None:
    for order in ("key", "seq"):
        data, info = encode_sst(SCHEMA.empty_table(), order=order)
        assert (info.num_entries, info.first_key, info.last_key, info.size_bytes) == (0, b"", b"", len(data))
    assert entries_to_table([]).schema == SCHEMA
