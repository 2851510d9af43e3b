"""The shared newest-per-key merge and SST cutter (slate_ops.sst.merge, slate_ops.sst.cut).

The memtable, the merged scans, a subcompaction, a Spark read task and a bulk load all use these;
here each is checked against a model: the newest source that has a key wins (within a source, the
highest seq), and an SST closes at the first row where its row bytes reach the target.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from slate_ops.sst import KIND_TOMBSTONE, KIND_VALUE, SCHEMA, Entry
from slate_ops.sst.cut import ROW_OVERHEAD, SstCutter
from slate_ops.sst.merge import live_rows, merge_newest, newest_entries, newest_per_key

keys = st.binary(max_size=4)
versions = st.lists(st.tuples(keys, st.sampled_from([KIND_VALUE, KIND_TOMBSTONE]), st.binary(max_size=6)))


def _source(rows: list[tuple[bytes, int, bytes]], base_seq: int) -> list[Entry]:
    """Key order, seq descending within a key (a key may repeat, as in a seq-ordered L0 SST)."""
    entries = [(key, base_seq + i, kind, b"" if kind else value) for i, (key, kind, value) in enumerate(rows)]
    return sorted(entries, key=lambda entry: (entry[0], -entry[1]))


def _model(sources: list[list[Entry]]) -> dict[bytes, Entry]:
    newest: dict[bytes, Entry] = {}
    for source in sources:  # newest first
        for entry in source:
            newest.setdefault(entry[0], entry)
    return newest


def _table(entries: list[Entry]) -> pa.Table:
    return pa.Table.from_pylist(
        [dict(zip(SCHEMA.names, entry, strict=True)) for entry in entries], schema=SCHEMA
    )


def _rows(table: pa.Table) -> list[Entry]:
    return [tuple(row.values()) for row in table.to_pylist()]


sources_strategy = st.lists(versions, max_size=4).map(
    lambda sources: [_source(rows, 1000 * (len(sources) - i)) for i, rows in enumerate(sources)]
)


@settings(max_examples=200, deadline=None)
@given(sources=sources_strategy)
def test_every_merge_keeps_the_newest_version_of_each_key(sources: list[list[Entry]]) -> None:
    model = _model(sources)
    expected = [model[key] for key in sorted(model)]
    live = [(key, entry[3]) for key, entry in sorted(model.items()) if entry[2] == KIND_VALUE]

    if sources:  # the callers never merge zero iterators
        assert list(newest_entries([iter(source) for source in sources])) == expected
        assert list(merge_newest([iter(source) for source in sources])) == live

    table = pa.concat_tables([_table(source) for source in sources]) if sources else SCHEMA.empty_table()
    assert _rows(newest_per_key(table)) == expected
    assert _rows(newest_per_key(table, drop_tombstones=True)) == [e for e in expected if e[2] == KIND_VALUE]
    assert _rows(live_rows(table)) == [e for s in sources for e in s if e[2] == KIND_VALUE]


rows_strategy = st.lists(st.tuples(st.binary(min_size=1, max_size=8), st.binary(max_size=40)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(rows=rows_strategy, target=st.integers(1, 300), data=st.data())
def test_cut_ssts_reach_the_target_and_do_not_depend_on_batching(
    rows: list[tuple[bytes, bytes]], target: int, data: st.DataObject
) -> None:
    table = pa.table({"key": [k for k, _ in rows], "value": [v for _, v in rows]})
    whole: list[pa.Table] = []
    cutter = SstCutter(target, whole.append)
    cutter.add(table)
    cutter.finish()

    streamed: list[pa.Table] = []
    cutter = SstCutter(target, streamed.append)
    offset = 0
    while offset < len(rows):
        size = data.draw(st.integers(0, len(rows) - offset), label="batch")
        cutter.add(table.slice(offset, size).to_batches()[0] if size else table.slice(offset, 0))
        offset += size
    cutter.finish()
    assert [t.to_pylist() for t in streamed] == [t.to_pylist() for t in whole]

    assert sum(t.num_rows for t in whole) == len(rows) and all(t.num_rows for t in whole)
    for i, sst in enumerate(whole):
        sizes = [
            len(k) + len(v) + ROW_OVERHEAD
            for k, v in zip(sst["key"].to_pylist(), sst["value"].to_pylist(), strict=True)
        ]
        assert sum(sizes[:-1]) < target  # it closes at the first row that reaches the target ...
        if i < len(whole) - 1:
            assert sum(sizes) >= target  # ... and only the last may close before
