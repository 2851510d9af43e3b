"""The manifest file format: :class:`~slate_ops.manifest.model.Manifest` <-> bytes.

The public entry points; the work is done by three modules:

* :mod:`slate_ops.manifest.framing` -- the file around the payload: format version and CRC-32,
  checked in an order that tells a damaged file (:class:`CorruptObjectError`) from one of a newer
  version (:class:`UnsupportedFormatVersionError`);
* :mod:`slate_ops.manifest.mapping` -- the schema <-> model mapping (the only user of the generated
  FlatBuffers code);
* :mod:`slate_ops.manifest.fastbuffers` -- the fast FlatBuffers builder and table reader it uses.

Any failure while parsing an intact payload (including a missing required field or an unknown
union member) is :class:`CorruptObjectError`.
"""

from __future__ import annotations

import struct

from slate_ops.errors import CorruptObjectError, InvalidArgumentError
from slate_ops.manifest.framing import FORMAT_VERSION, PAYLOAD_OFFSET, SUPPORTED_VERSIONS, frame, unframe
from slate_ops.manifest.mapping import decode_payload, encode_payload
from slate_ops.manifest.model import Manifest

__all__ = ["FORMAT_VERSION", "SUPPORTED_VERSIONS", "decode_manifest", "encode_manifest"]


def encode_manifest(m: Manifest) -> bytes:
    """Serialise ``m`` in format :data:`FORMAT_VERSION`.

    Raises :class:`InvalidArgumentError` if a value does not fit the schema (a negative number,
    an integer wider than its field, a non-ULID id).
    """
    try:
        payload = encode_payload(m)
    except (TypeError, ValueError, AttributeError, OverflowError, struct.error) as e:
        raise InvalidArgumentError(f"cannot encode manifest: {e}") from e
    return frame(payload)


def decode_manifest(data: bytes, path: str) -> Manifest:
    """Parse a manifest file read from ``path`` (used in error messages only).

    Raises :class:`CorruptObjectError` if it is truncated, fails its checksum or cannot be parsed,
    and :class:`~slate_ops.errors.UnsupportedFormatVersionError` if it is intact but of a version
    not in :data:`SUPPORTED_VERSIONS`.
    """
    body = unframe(bytes(data), path)
    try:
        return decode_payload(body, PAYLOAD_OFFSET)
    except Exception as e:
        raise CorruptObjectError(path, f"cannot parse the manifest payload: {e}") from e
