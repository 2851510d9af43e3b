"""Which engine wrote a manifest file, from its bytes alone.

Both engines keep ``<db>/manifest/<20-digit id>.manifest`` and both write FlatBuffers, so neither
the key nor "is it a FlatBuffer" tells them apart. Their framings do (docs/design/slatedb-engine.md,
"Telling the engines apart")::

    slate_ops  u16 LITTLE-endian version (1 -> 01 00) | FlatBuffers payload | u32 LE CRC-32 of all before
    SlateDB    u16 BIG-endian version (1, 2 -> 00 01, 00 02) | FlatBuffers payload (no checksum)

(SlateDB: ``FlatBufferManifestCodec::decode`` in slatedb/src/flatbuffer_types.rs reads
``u16::from_be_bytes(bytes[0..2])`` and accepts versions 1 and 2; 0.17.0 writes 2.)

:func:`detect_manifest` decides in this order:

1. **slate_ops** if the trailing CRC-32 matches: a SlateDB file passes this by chance with
   probability 2**-32 per file, and a slate_ops file that fails it is damaged, not foreign;
2. **SlateDB** if :func:`slate_ops.manifest.framing.slatedb_manifest_version` finds SlateDB's
   framing (the one implementation of that check, shared with :func:`~slate_ops.manifest.framing.unframe`,
   which raises :class:`~slate_ops.errors.SlateDbManifestError` on it): the first byte is 0 (a
   big-endian version below 256; ours would need version 0 or >= 256 to start with 0, and we write
   1), the version is not 0, and the FlatBuffers root offset and the root table's vtable lie inside
   the file;
3. otherwise :class:`~slate_ops.errors.CorruptObjectError`: no engine wrote this (or it is torn).

A SlateDB manifest of a version the pinned binding does not read is still *detected* as SlateDB
(``supported`` False), so the caller can name the versions instead of calling it corrupt. Pure:
no binding import, no store access.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass

from slate_ops.errors import CorruptObjectError
from slate_ops.manifest.framing import SUPPORTED_VERSIONS as SLATE_OPS_VERSIONS
from slate_ops.manifest.framing import slatedb_manifest_version

__all__ = ["SLATEDB_MANIFEST_VERSIONS", "Detection", "Engine", "detect_manifest"]

# The manifest format versions the pinned binding (slatedb==0.17.0) reads.
SLATEDB_MANIFEST_VERSIONS: tuple[int, ...] = (1, 2)

_U16_LE = struct.Struct("<H")
_U32_LE = struct.Struct("<I")


class Engine(enum.StrEnum):
    """The engine that owns a database's format."""

    SLATE_OPS = "slate_ops"
    SLATEDB = "slatedb"


@dataclass(frozen=True)
class Detection:
    """What :func:`detect_manifest` found: the engine, the file's format version, and whether this
    slate_ops (or the pinned binding, for SlateDB) reads that version."""

    engine: Engine
    format_version: int
    supported: bool

    @property
    def supported_versions(self) -> tuple[int, ...]:
        return SLATE_OPS_VERSIONS if self.engine is Engine.SLATE_OPS else SLATEDB_MANIFEST_VERSIONS


def _is_slate_ops(data: bytes) -> bool:
    if len(data) < _U16_LE.size + 4 + _U32_LE.size:
        return False
    body_len = len(data) - _U32_LE.size
    (stored,) = _U32_LE.unpack_from(data, body_len)
    return bool(stored == zlib.crc32(memoryview(data)[:body_len]))


def detect_manifest(data: bytes, path: str = "<manifest>") -> Detection:
    """The engine that wrote the manifest file ``data`` (read from ``path``, used in messages only).

    Raises :class:`CorruptObjectError` when neither engine's framing fits.
    """
    data = bytes(data)
    if _is_slate_ops(data):
        (version,) = _U16_LE.unpack_from(data, 0)
        return Detection(Engine.SLATE_OPS, version, version in SLATE_OPS_VERSIONS)
    version = slatedb_manifest_version(data)
    if version is not None:
        return Detection(Engine.SLATEDB, version, version in SLATEDB_MANIFEST_VERSIONS)
    raise CorruptObjectError(
        path,
        f"{len(data)} bytes that are neither a slate_ops manifest (little-endian version, FlatBuffers, "
        "CRC-32 trailer; the checksum does not match) nor a SlateDB manifest (big-endian version, "
        "FlatBuffers)",
    )
