"""The fast FlatBuffers builder and reader (slate_ops.manifest.fastbuffers) against the stock ones.

The builder must write exactly the bytes of ``flatbuffers.Builder``: on whole manifests, and on
random programs of the builder calls the generated code makes. The reader must read exactly what
the generated accessors read, defaults of absent fields included.
"""

from __future__ import annotations

import struct
from typing import Any

import flatbuffers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ulid import ULID

from slate_ops.manifest import mapping
from slate_ops.manifest._generated import CompactedSsTable as fb_sst
from slate_ops.manifest._generated import SsTableInfo as fb_info
from slate_ops.manifest._generated import Ulid as fb_ulid
from slate_ops.manifest._generated import Uuid as fb_uuid
from slate_ops.manifest.codec import encode_manifest
from slate_ops.manifest.fastbuffers import (
    ID,
    OFFSET,
    UINT,
    ULONG,
    Builder,
    LayoutCache,
    PayloadError,
    TableReader,
)
from slate_ops.manifest.model import Manifest
from tests.manifest.strategies import manifests

U64 = st.integers(0, 2**64 - 1)
U32 = st.integers(0, 2**32 - 1)


class StockBuilder(flatbuffers.Builder):  # type: ignore[misc]
    """The stock builder, writing ids with the generated CreateUlid like plain generated code."""

    def create_id(self, value: ULID) -> int:
        high, low = struct.unpack(">QQ", value.bytes)
        return int(fb_ulid.CreateUlid(self, high, low))


# --- the builder ------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(manifests)
def test_fast_builder_writes_the_same_bytes_as_the_stock_builder(m: Manifest) -> None:
    fast = encode_manifest(m)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mapping, "Builder", StockBuilder)
        stock = encode_manifest(m)
    assert fast == stock


# One table field: (kind, value); "u64"/"u32" equal to 0 are the default, so not written.
fields = st.one_of(
    st.tuples(st.just("u64"), st.one_of(st.just(0), U64)),
    st.tuples(st.just("u32"), st.one_of(st.just(0), U32)),
    st.tuples(st.just("bytes"), st.binary(max_size=40)),
    st.tuples(st.just("id"), st.binary(min_size=16, max_size=16)),
)
programs = st.fixed_dictionaries(
    {
        "tables": st.lists(st.lists(fields, max_size=6), max_size=8),
        "initial_size": st.sampled_from([0, 1, 64, 1024]),
        "misalign": st.integers(0, 7),
        "force_defaults": st.booleans(),
    }
)


def run_program(b: Any, program: dict[str, Any]) -> bytes:
    """Tables of the given fields (each twice, so vtables are shared), a vector of them, a root."""
    b.ForceDefaults(program["force_defaults"])
    for _ in range(program["misalign"]):
        b.PrependUint8(0xEE)
    offsets = []
    for table in program["tables"] * 2:
        vectors = {i: b.CreateByteVector(v) for i, (kind, v) in enumerate(table) if kind == "bytes"}
        b.StartObject(len(table) + 1)  # one trailing slot never written
        for i, (kind, value) in enumerate(table):
            if kind == "u64":
                b.PrependUint64Slot(i, value, 0)
            elif kind == "u32":
                b.PrependUint32Slot(i, value, 0)
            elif kind == "bytes":
                b.PrependUOffsetTRelativeSlot(i, vectors[i], 0)
            else:
                b.PrependStructSlot(i, b.create_id(ULID(value)), 0)
        offsets.append(b.EndObject())
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    vector = b.EndVector()
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(0, vector, 0)
    b.PrependUint64(7)  # an unslotted scalar, as struct fields are written
    b.Finish(b.EndObject())
    return bytes(b.Output())


@settings(max_examples=200, deadline=None)
@given(programs)
def test_fast_builder_runs_any_program_like_the_stock_builder(program: dict[str, Any]) -> None:
    size = program["initial_size"]
    assert run_program(Builder(size), program) == run_program(StockBuilder(size), program)


@pytest.mark.parametrize("misalign", range(9))
@pytest.mark.parametrize("create", [fb_ulid.CreateUlid, fb_uuid.CreateUuid])
def test_create_id_writes_the_generated_struct(misalign: int, create: Any) -> None:
    value = ULID(bytes(range(1, 17)))
    stock, fast = flatbuffers.Builder(0), Builder(0)
    for b in (stock, fast):
        for _ in range(misalign):
            b.PrependUint8(0xEE)
    stock_at = create(stock, *struct.unpack(">QQ", value.bytes))
    assert fast.create_id(value) == stock_at
    assert fast.Bytes[fast.Head() :] == stock.Bytes[stock.Head() :]


def test_builder_keeps_the_stock_checks() -> None:
    b = Builder(0)
    b.StartObject(1)
    with pytest.raises(flatbuffers.builder.IsNestedError):
        b.StartObject(1)
    with pytest.raises(flatbuffers.builder.IsNestedError):
        b.CreateByteVector(b"x")
    with pytest.raises(TypeError, match="uint64"):
        b.PrependUint64Slot(0, 2**64, 0)
    with pytest.raises(TypeError, match="uint32"):
        b.PrependUint32Slot(0, -1, 0)
    b.EndObject()
    with pytest.raises(flatbuffers.builder.IsNotNestedError):
        b.EndObject()
    with pytest.raises(TypeError, match="non-byte vector"):
        b.CreateByteVector("text")


# --- the reader -------------------------------------------------------------------------------------

INFO_FIELDS = [
    ("FirstKeyLength", OFFSET, False),
    ("SizeBytes", ULONG, False),
    ("NumEntries", ULONG, False),
    ("MinSeq", ULONG, False),
    ("MaxSeq", ULONG, False),
    ("FormatVersion", UINT, False),
]
INFO_READER = TableReader(fb_info.SsTableInfo, INFO_FIELDS)
SST_READER = TableReader(fb_sst.CompactedSsTable, [("Id", ID, True), ("OriginalId", ID, False)])

infos = st.fixed_dictionaries(
    {},
    optional={
        "FirstKey": st.binary(max_size=20),
        "SizeBytes": U64,
        "NumEntries": U64,
        "MinSeq": U64,
        "MaxSeq": U64,
        "FormatVersion": U32,
    },
)


def build_info(b: flatbuffers.Builder, values: dict[str, Any]) -> int:
    key = b.CreateByteVector(values["FirstKey"]) if "FirstKey" in values else None
    fb_info.SsTableInfoStart(b)
    for name, value in values.items():
        getattr(fb_info, f"SsTableInfoAdd{name}")(b, key if name == "FirstKey" else value)
    return int(fb_info.SsTableInfoEnd(b))


@settings(max_examples=200, deadline=None)
@given(st.lists(infos, min_size=1, max_size=6), st.booleans())
def test_reader_reads_what_the_generated_accessors_read(values: list[dict[str, Any]], force: bool) -> None:
    b = flatbuffers.Builder(0)
    b.ForceDefaults(force)
    offsets = [build_info(b, v) for v in values]
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    b.Finish(b.EndVector())
    buf = bytes(b.Output())
    cache = LayoutCache(INFO_READER, buf)
    (vector,) = struct.unpack_from("<I", buf, 0)
    for i in range(len(values)):
        at = vector + 4 + 4 * i
        pos = at + struct.unpack_from("<I", buf, at)[0]
        info = fb_info.SsTableInfo()
        info.Init(buf, pos)
        layout = cache.of(pos)
        key_rel, *scalars = layout.read(buf, pos)
        assert scalars == [getattr(info, name)() for name, _, _ in INFO_FIELDS[1:]]
        assert (key_rel != 0) == (not info.FirstKeyIsNone())
        if key_rel:
            key_at = pos + layout.field_offsets[0] + key_rel
            (length,) = struct.unpack_from("<I", buf, key_at)
            assert buf[key_at + 4 : key_at + 4 + length] == info.FirstKeyAsNumpy().tobytes()


def test_reader_reads_ids_and_refuses_a_missing_required_one() -> None:
    b = flatbuffers.Builder(0)
    fb_sst.CompactedSsTableStart(b)
    fb_sst.CompactedSsTableAddOriginalId(b, fb_ulid.CreateUlid(b, 1, 2))
    fb_sst.CompactedSsTableAddId(b, fb_ulid.CreateUlid(b, 3, 4))
    b.Finish(fb_sst.CompactedSsTableEnd(b))
    buf = bytes(b.Output())
    pos = struct.unpack_from("<I", buf, 0)[0]
    assert LayoutCache(SST_READER, buf).of(pos).read(buf, pos) == (3, 4, 1, 2)

    b = flatbuffers.Builder(0)
    fb_sst.CompactedSsTableStart(b)
    fb_sst.CompactedSsTableAddOriginalId(b, fb_ulid.CreateUlid(b, 1, 2))
    b.Finish(fb_sst.CompactedSsTableEnd(b))
    buf = bytes(b.Output())
    pos = struct.unpack_from("<I", buf, 0)[0]
    with pytest.raises(PayloadError, match="CompactedSsTable lacks required field Id"):
        LayoutCache(SST_READER, buf).of(pos)


def test_reader_refuses_a_vtable_outside_the_buffer() -> None:
    buf = struct.pack("<i", -1000) + bytes(8)
    with pytest.raises(PayloadError, match="outside the buffer"):
        LayoutCache(INFO_READER, buf).of(0)
