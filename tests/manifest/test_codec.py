"""The manifest file format (slate_ops.manifest.codec): round trips, framing, corruption."""

from __future__ import annotations

import struct
import uuid
import zlib

import flatbuffers
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ulid import ULID

from benchmarks.manifest_fixtures import build_large_manifest
from slate_ops.errors import CorruptObjectError, InvalidArgumentError, UnsupportedFormatVersionError
from slate_ops.manifest import mapping
from slate_ops.manifest.codec import FORMAT_VERSION, SUPPORTED_VERSIONS, decode_manifest, encode_manifest
from slate_ops.manifest.model import (
    Checkpoint,
    CompactedSst,
    ExternalDb,
    KeyRange,
    Manifest,
    SortedRun,
    SstInfo,
    SstView,
    WriterCheckpoint,
)
from tests.manifest.strategies import manifests

PATH = "dbs/orders/manifest/00000000000000000042.manifest"


def small_manifest() -> Manifest:
    """Every kind of field set at least once, but only a few hundred bytes."""
    sst = CompactedSst(ULID.from_int(7), SstInfo(b"a", b"m", 4096, 10, 1, 10), original_id=ULID.from_int(3))
    return Manifest(
        writer_epoch=2,
        compactor_epoch=1,
        l0_last_compacted=ULID.from_int(9),
        external_dbs=(ExternalDb("parent", uuid.UUID(int=1), uuid.UUID(int=2), (ULID.from_int(3),)),),
        ssts=(sst,),
        l0=(SstView(ULID.from_int(9), sst.id, KeyRange(b"", None)),),
        compacted=(SortedRun(3, (SstView(ULID.from_int(10), sst.id),)),),
        checkpoints=(Checkpoint(uuid.UUID(int=5), 4, 1_700_000_000, None, WriterCheckpoint(2), "tag"),),
    )


def reframe(data: bytes, version: int) -> bytes:
    """``data`` with another format version and a checksum that matches again."""
    body = struct.pack("<H", version) + data[2:-4]
    return body + struct.pack("<I", zlib.crc32(body))


# --- round trips ----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifests)
def test_round_trip(m: Manifest) -> None:
    data = encode_manifest(m)
    decoded = decode_manifest(data, PATH)
    assert decoded == m
    assert hash(decoded) == hash(m)
    assert encode_manifest(decoded) == data  # deterministic


def test_empty_manifest_round_trips() -> None:
    for m in (Manifest(), Manifest(initialized=False, next_wal_sst_id=0)):
        assert decode_manifest(encode_manifest(m), PATH) == m


def test_none_and_zero_are_distinct() -> None:
    zero = Manifest(
        destroyed_at_s=0,
        deleted_at_s=0,
        checkpoints=(Checkpoint(uuid.UUID(int=0), 0, 0, expire_time_s=0, name=""),),
    )
    unset = Manifest(checkpoints=(Checkpoint(uuid.UUID(int=0), 0, 0),))
    assert decode_manifest(encode_manifest(zero), PATH) == zero
    assert decode_manifest(encode_manifest(unset), PATH) == unset
    ranges = (KeyRange(), KeyRange(b"", b""), KeyRange(None, b""), KeyRange(b"", None))
    m = Manifest(l0=tuple(SstView(ULID.from_int(i), ULID.from_int(i), r) for i, r in enumerate(ranges)))
    m = m.with_changes(l0=(*m.l0, SstView(ULID.from_int(9), ULID.from_int(9), None)))
    assert decode_manifest(encode_manifest(m), PATH) == m


def test_large_manifest_round_trips() -> None:
    m = build_large_manifest()
    decoded = decode_manifest(encode_manifest(m), PATH)
    assert decoded == m
    # Views share the ULID objects of the SSTs they reference.
    by_id = {s.id: s.id for s in decoded.ssts}
    assert all(v.sst_id is by_id[v.sst_id] for v in decoded.l0)


def test_file_layout() -> None:
    data = encode_manifest(small_manifest())
    assert FORMAT_VERSION in SUPPORTED_VERSIONS
    assert struct.unpack_from("<H", data, 0) == (FORMAT_VERSION,)
    assert struct.unpack_from("<I", data, len(data) - 4) == (zlib.crc32(data[:-4]),)


def test_decode_accepts_bytes_like_objects() -> None:
    m = small_manifest()
    data = encode_manifest(m)
    assert decode_manifest(bytearray(data), PATH) == m  # type: ignore[arg-type]
    assert decode_manifest(memoryview(data), PATH) == m  # type: ignore[arg-type]


# --- values the schema cannot hold ------------------------------------------------------------------


@pytest.mark.parametrize(
    "m",
    [
        Manifest(writer_epoch=-1),
        Manifest(last_l0_seq=2**64),
        Manifest(destroyed_at_s=2**64),
        Manifest(deleted_at_s=-1),
        Manifest(compacted=(SortedRun(2**32),)),
        Manifest(ssts=(CompactedSst(ULID.from_int(1), SstInfo(b"", b"", -5, 0, 0, 0)),)),
        Manifest(ssts=(CompactedSst(ULID.from_int(1), SstInfo(b"", b"", 0, 0, 0, 0, format_version=2**32)),)),
        Manifest(checkpoints=(Checkpoint(uuid.UUID(int=1), 0, 0, expire_time_s=-1),)),
        Manifest(l0=(SstView("not a ulid", ULID.from_int(1)),)),  # type: ignore[arg-type]
        Manifest(ssts=(CompactedSst(ULID.from_int(1), SstInfo("a", b"", 0, 0, 0, 0)),)),  # type: ignore[arg-type]
    ],
)
def test_encode_refuses_values_the_schema_cannot_hold(m: Manifest) -> None:
    with pytest.raises(InvalidArgumentError, match="cannot encode manifest"):
        encode_manifest(m)


# --- corruption and versions --------------------------------------------------------------------


def test_every_flipped_byte_is_reported_as_corrupt() -> None:
    data = encode_manifest(small_manifest())
    for i in range(len(data)):
        for mask in (0x01, 0xFF):
            damaged = bytearray(data)
            damaged[i] ^= mask
            with pytest.raises(CorruptObjectError) as info:
                decode_manifest(bytes(damaged), PATH)
            # Checked before the version, so a damaged version byte is corrupt, not "unsupported".
            assert type(info.value) is CorruptObjectError, i
            assert info.value.path == PATH
            assert PATH in str(info.value)


def test_every_truncation_is_reported_as_corrupt() -> None:
    data = encode_manifest(small_manifest())
    for length in range(len(data)):
        with pytest.raises(CorruptObjectError) as info:
            decode_manifest(data[:length], PATH)
        assert type(info.value) is CorruptObjectError, length
        assert PATH in str(info.value)


def test_extra_trailing_bytes_are_corrupt() -> None:
    with pytest.raises(CorruptObjectError, match="checksum"):
        decode_manifest(encode_manifest(small_manifest()) + b"\x00", PATH)


@pytest.mark.parametrize("version", [0, 2, 0xFFFF])
def test_intact_file_of_unknown_version_is_unsupported(version: int) -> None:
    data = reframe(encode_manifest(small_manifest()), version)
    with pytest.raises(UnsupportedFormatVersionError) as info:
        decode_manifest(data, PATH)
    assert info.value.path == PATH
    assert info.value.version == version
    assert PATH in str(info.value)
    assert f"format version {version}" in str(info.value)
    assert isinstance(info.value, CorruptObjectError)  # callers catching "unreadable" still catch it


def test_missing_required_field_is_corrupt() -> None:
    b = flatbuffers.Builder(64)
    b.StartObject(0)
    b.Finish(b.EndObject())  # a ManifestV2 with no fields at all
    data = reframe(b"\x00\x00" + bytes(b.Output()) + b"\x00" * 4, FORMAT_VERSION)
    with pytest.raises(CorruptObjectError, match=r"ManifestV2\.ssts is missing") as info:
        decode_manifest(data, PATH)
    assert type(info.value) is CorruptObjectError


def test_unknown_checkpoint_metadata_type_is_corrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    generated = mapping._fb_checkpoint
    add_type = generated.CheckpointAddMetadataType
    monkeypatch.setattr(generated, "CheckpointAddMetadataType", lambda b, _: add_type(b, 7))
    m = Manifest(checkpoints=(Checkpoint(uuid.UUID(int=1), 1, 1, metadata=WriterCheckpoint(3)),))
    with pytest.raises(CorruptObjectError, match="unknown checkpoint metadata type 7"):
        decode_manifest(encode_manifest(m), PATH)


@pytest.mark.parametrize(
    ("module", "adder", "message"),
    [
        ("_fb_sst", "CompactedSsTableAddInfo", "CompactedSsTable lacks required field Info"),
        ("_fb_sst", "CompactedSsTableAddId", "CompactedSsTable lacks required field Id"),
        ("_fb_view", "CompactedSsTableViewAddSstId", "CompactedSsTableView lacks required field SstId"),
        ("_fb_info", "SsTableInfoAddFirstKey", "SsTableInfo lacks required field FirstKey"),
        ("_fb_external", "ExternalDbAddPath", "ExternalDb.path is missing"),
        ("_fb_checkpoint", "CheckpointAddId", "Checkpoint.id is missing"),
        ("_fb_run", "SortedRunV2AddSsts", "SortedRunV2.ssts is missing"),
    ],
)
def test_missing_required_fields_are_corrupt(
    monkeypatch: pytest.MonkeyPatch, module: str, adder: str, message: str
) -> None:
    monkeypatch.setattr(getattr(mapping, module), adder, lambda *args: None)
    with pytest.raises(CorruptObjectError, match=message) as info:
        decode_manifest(encode_manifest(small_manifest()), PATH)
    assert type(info.value) is CorruptObjectError


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.data())
def test_garbage_with_a_valid_checksum_is_corrupt_or_decodes(payload: bytes, data: st.DataObject) -> None:
    """Only checksummed garbage reaches the FlatBuffers parser; whatever happens there must come
    out as CorruptObjectError (or, by chance, a manifest), never as another exception."""
    if data.draw(st.booleans()):  # splice garbage into a real payload, so parsing gets further
        real = encode_manifest(small_manifest())[2:-4]
        at = data.draw(st.integers(0, len(real)))
        payload = real[:at] + payload + real[at + len(payload) :]
    framed = reframe(b"\x00\x00" + payload + b"\x00" * 4, FORMAT_VERSION)
    try:
        result = decode_manifest(framed, PATH)
    except CorruptObjectError as e:
        assert type(e) is CorruptObjectError
        assert PATH in str(e)
    else:
        assert isinstance(result, Manifest)
