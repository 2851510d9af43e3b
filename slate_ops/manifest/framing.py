"""The framing of a manifest file: format version and checksum around the FlatBuffers payload.

File layout (every format version keeps this framing; only the payload may change)::

    offset 0       u16 little-endian   FORMAT_VERSION
    offset 2       ...                 FlatBuffers payload, root table ManifestV2 (schema/manifest.fbs)
    offset len-4   u32 little-endian   CRC-32 (zlib.crc32, IEEE) of every byte before it

:func:`unframe` checks, in order:

1. the file is long enough to hold the framing, else :class:`CorruptObjectError`;
2. the checksum, else :class:`CorruptObjectError`. It is checked *before* the version because a
   torn or bit-flipped file cannot be trusted to report its own version: a garbage version must
   read as "corrupt (restore it)", not as "upgrade slate_ops";
3. the version, else :class:`UnsupportedFormatVersionError` -- the file is intact, it was just
   written by a newer slate_ops. This is why the framing itself may never change between versions.

A file that fails the checksum but has SlateDB's framing (:func:`slatedb_manifest_version`: a
big-endian u16 version, 1 or more and below 256, then a FlatBuffer whose root table and vtable lie
inside the file; SlateDB writes no checksum) is :class:`SlateDbManifestError`: the path holds a
SlateDB database, not a damaged slate_ops one. Ours start with ``01 00`` (little-endian version 1),
SlateDB's with ``00 0v``, so a damaged slate_ops file of version 1 can never read as SlateDB's.

Parsing the payload (step 4, where any failure is :class:`CorruptObjectError` too) is the caller's
(:func:`slate_ops.manifest.codec.decode_manifest`).

CRC-32 rather than CRC-32C: ``zlib.crc32`` is in the standard library and runs at memory speed,
and for a single-object integrity check both detect every burst error up to 32 bits.
"""

from __future__ import annotations

import struct
import zlib

from slate_ops.errors import CorruptObjectError, SlateDbManifestError, UnsupportedFormatVersionError

__all__ = [
    "FORMAT_VERSION",
    "PAYLOAD_OFFSET",
    "SUPPORTED_VERSIONS",
    "frame",
    "slatedb_manifest_version",
    "unframe",
]

FORMAT_VERSION = 1
SUPPORTED_VERSIONS: tuple[int, ...] = (1,)

_VERSION = struct.Struct("<H")
_CRC = struct.Struct("<I")
# Where the payload starts in the file and in the body that :func:`unframe` returns.
PAYLOAD_OFFSET = _VERSION.size
_TRAILER_LEN = _CRC.size
# The smallest framing that can hold a payload: the version, the root table offset, the CRC.
_MIN_LEN = PAYLOAD_OFFSET + 4 + _TRAILER_LEN


def frame(payload: bytes) -> bytes:
    """The file holding ``payload`` in format :data:`FORMAT_VERSION`."""
    body = _VERSION.pack(FORMAT_VERSION) + payload
    return body + _CRC.pack(zlib.crc32(body))


def unframe(data: bytes, path: str) -> bytes:
    """The body of the file ``data`` read from ``path`` (used in error messages only): its version
    and payload without the checksum, the payload at :data:`PAYLOAD_OFFSET`.

    Raises :class:`CorruptObjectError` if it is truncated or fails its checksum, and
    :class:`UnsupportedFormatVersionError` if it is intact but of a version not in
    :data:`SUPPORTED_VERSIONS`.
    """
    if len(data) < _MIN_LEN:
        raise CorruptObjectError(
            path, f"only {len(data)} bytes; a manifest has at least {_MIN_LEN} (truncated?)"
        )
    body_len = len(data) - _TRAILER_LEN
    (stored_crc,) = _CRC.unpack_from(data, body_len)
    actual_crc = zlib.crc32(memoryview(data)[:body_len])
    if stored_crc != actual_crc:
        slatedb_version = slatedb_manifest_version(data)
        if slatedb_version is not None:
            raise SlateDbManifestError(path, slatedb_version)
        raise CorruptObjectError(
            path,
            f"checksum mismatch (stored {stored_crc:#010x}, computed {actual_crc:#010x}); "
            "the file is truncated or damaged",
        )
    (version,) = _VERSION.unpack_from(data, 0)
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedFormatVersionError(path, version, SUPPORTED_VERSIONS)
    # The decoder sees only version + payload, so nothing reads into the CRC.
    return data[:body_len]


_U16_BE = struct.Struct(">H")
_U16_LE = struct.Struct("<H")
_U32_LE = struct.Struct("<I")
_I32_LE = struct.Struct("<i")


def slatedb_manifest_version(data: bytes) -> int | None:
    """The format version of ``data`` if it has the framing of a SlateDB manifest (SlateDB's
    ``FlatBufferManifestCodec``: a big-endian u16 version, then the FlatBuffer), else None.

    A check of the framing only (the FlatBuffer's root table and vtable lie inside the file), made
    on files that failed our checksum: it tells "a SlateDB database" from "a damaged file".
    """
    if len(data) < 2 + 8 or data[0] != 0:
        return None
    (version,) = _U16_BE.unpack_from(data, 0)
    buf = memoryview(data)[2:]
    (root,) = _U32_LE.unpack_from(buf, 0)
    if version == 0 or root < 4 or root + 4 > len(buf):
        return None
    (soffset,) = _I32_LE.unpack_from(buf, root)
    vtable = root - soffset
    if vtable < 0 or vtable + 4 > len(buf):
        return None
    vtable_size, table_size = _U16_LE.unpack_from(buf, vtable)[0], _U16_LE.unpack_from(buf, vtable + 2)[0]
    fits = vtable_size >= 4 and vtable_size % 2 == 0 and vtable + vtable_size <= len(buf)
    return version if fits and root + table_size <= len(buf) else None
