"""Fast FlatBuffers for Python: a flatter builder and a one-``unpack_from``-per-table reader.

Python FlatBuffers accessors and builder calls cost several nested Python calls per field (the
stock builder took ~300 ms to encode a manifest of 10,000 SSTs). This module knows FlatBuffers, not
the manifest schema; :mod:`slate_ops.manifest.mapping` uses it with the generated code.

* :class:`Builder` is a ``flatbuffers.Builder`` whose hot methods are flattened; the generated
  builder functions run on it unchanged and it writes byte-identical output (tested against the
  stock builder in ``tests/manifest/test_fastbuffers.py``). :meth:`Builder.create_id` writes a
  16-byte id (ULID or UUID) as a struct of two ulongs in one pack.
* :class:`TableReader` reads every field of a table of one generated type with a single
  ``struct.unpack_from``, at the field offsets in the table's vtable, for the vtable slots (and
  defaults) that the generated accessors themselves use (see :class:`_SlotProbe`); :class:`Layout`
  and :class:`LayoutCache` keep that compiled per vtable. Malformed input raises
  :class:`PayloadError`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from operator import add, itemgetter
from typing import Any

import flatbuffers
from ulid import ULID

__all__ = [
    "I32",
    "ID",
    "ID_HALVES",
    "OFFSET",
    "STRUCT_ID",
    "U32",
    "UINT",
    "ULONG",
    "Builder",
    "Layout",
    "LayoutCache",
    "PayloadError",
    "TableReader",
    "required_table_positions",
    "table_positions",
    "vtable_slot",
]

# ULIDs and UUIDs are stored as two ulongs: high = bytes 0..7, low = bytes 8..15 (big-endian).
ID_HALVES = struct.Struct(">QQ")
U32 = struct.Struct("<I")
I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")
STRUCT_ID = struct.Struct("<QQ")  # a Ulid/Uuid struct as FlatBuffers lays it out


# --- building ---------------------------------------------------------------------------------


_U64_MAX = 2**64 - 1
_U32_MAX = 2**32 - 1
_PACK_U64 = struct.Struct("<Q").pack_into
_PACK_U32 = struct.Struct("<I").pack_into
_PACK_I32 = struct.Struct("<i").pack_into


class Builder(flatbuffers.Builder):  # type: ignore[misc]  # flatbuffers has no type hints
    """``flatbuffers.Builder`` with flatter versions of the calls that the generated code makes
    tens of times per SST: the stock ones go through 3-8 nested Python calls each, which made
    encoding a 10,000-SST manifest take ~300 ms.

    Each override keeps the stock semantics and range checks, so the bytes are identical to the
    stock builder's (``tests/manifest/test_fastbuffers.py`` checks that). The recurring shortcut:
    ``Prep(size, n)`` (pad so that ``size`` is aligned after ``n`` more bytes, growing the buffer if
    needed) does nothing when the head is already aligned, there is room and ``minalign >= size``,
    so it is only called when one of those fails.
    """

    # The stock builder's state that the overrides use.
    Bytes: bytearray
    head: int
    minalign: int
    nested: bool
    forceDefaults: bool
    objectEnd: int
    current_vtable: list[int]  # None between objects
    vtables: dict[tuple[int, ...], int]
    vectorNumElems: int | None

    def Prep(self, size: int, additional_bytes: int) -> None:
        if size > self.minalign:
            self.minalign = size
        head = self.head
        pad = (head - len(self.Bytes) - additional_bytes) & (size - 1)
        if head < pad + size + additional_bytes:
            super().Prep(size, additional_bytes)  # grows the buffer, then pads
        elif pad:
            self.Bytes[head - pad : head] = bytes(pad)
            self.head = head - pad

    def StartObject(self, numfields: int) -> None:
        if self.nested:
            raise flatbuffers.builder.IsNestedError()
        self.current_vtable = [0] * numfields
        self.objectEnd = len(self.Bytes) - self.head
        self.nested = True

    def EndObject(self) -> int:
        """The stock ``EndObject``/``WriteVtable``, short-cut when an identical vtable has already
        been written (the common case: all SSTs share one or two). The deduplication key is the
        stock one; on a miss the stock ``WriteVtable`` writes the new vtable."""
        if not self.nested:
            raise flatbuffers.builder.IsNotNestedError()
        self.nested = False
        head = self.head
        offset = len(self.Bytes) - head
        # Where the object starts once its 4-byte, 4-aligned vtable offset is prepended.
        object_offset = offset + (-offset & 3) + 4
        fields = self.current_vtable
        end = len(fields)
        while end and not fields[end - 1]:
            end -= 1
        key = [object_offset - f if f else 0 for f in reversed(fields[:end])]
        key.append(object_offset - self.objectEnd)
        existing = self.vtables.get(tuple(key))
        if existing is None:
            return int(self.WriteVtable())
        if offset & 3 or head < 4 or self.minalign < 4:
            self.Prep(4, 0)
            head = self.head
        head = self.head = head - 4
        _PACK_I32(self.Bytes, head, existing - object_offset)
        self.current_vtable = None  # type: ignore[assignment]
        return object_offset

    def PrependUint64(self, x: int) -> None:
        if not 0 <= x <= _U64_MAX:
            raise TypeError(f"bad number {x} for type uint64")
        head = self.head
        if (head - len(self.Bytes)) & 7 or head < 8 or self.minalign < 8:
            self.Prep(8, 0)
            head = self.head
        head = self.head = head - 8
        _PACK_U64(self.Bytes, head, x)

    def PrependUint64Slot(self, slot: int, x: int, default: int | None) -> None:
        if x != default or (self.forceDefaults and default is not None):
            if not 0 <= x <= _U64_MAX:
                raise TypeError(f"bad number {x} for type uint64")
            head = self.head
            if (head - len(self.Bytes)) & 7 or head < 8 or self.minalign < 8:
                self.Prep(8, 0)
                head = self.head
            head = self.head = head - 8
            _PACK_U64(self.Bytes, head, x)
            self.current_vtable[slot] = len(self.Bytes) - head

    def PrependUint32Slot(self, slot: int, x: int, default: int | None) -> None:
        if x != default or (self.forceDefaults and default is not None):
            if not 0 <= x <= _U32_MAX:
                raise TypeError(f"bad number {x} for type uint32")
            self.Prep(4, 0)
            head = self.head = self.head - 4
            _PACK_U32(self.Bytes, head, x)
            self.current_vtable[slot] = len(self.Bytes) - head

    def _prepend_offset(self, pack_into: Callable[[bytearray, int, int], None], off: int) -> int:
        """Stock ``PrependUOffsetTRelative``/``PrependSOffsetTRelative`` (they differ only in
        signedness): write the distance from here to ``off``; returns the new offset."""
        head = self.head
        offset = len(self.Bytes) - head
        if offset & 3 or head < 4 or self.minalign < 4:
            self.Prep(4, 0)
            head = self.head
            offset = len(self.Bytes) - head
        if not off <= offset:
            raise flatbuffers.builder.OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
        head = self.head = head - 4
        pack_into(self.Bytes, head, offset - off + 4)
        return offset + 4

    def PrependUOffsetTRelative(self, off: int) -> None:
        self._prepend_offset(_PACK_U32, off)

    def PrependSOffsetTRelative(self, off: int) -> None:
        self._prepend_offset(_PACK_I32, off)

    def PrependUOffsetTRelativeSlot(self, slot: int, x: int, default: int) -> None:
        if x != default or self.forceDefaults:
            self.current_vtable[slot] = self._prepend_offset(_PACK_U32, x)

    def PrependStructSlot(self, slot: int, x: int, default: int) -> None:
        if x != default:
            if x != len(self.Bytes) - self.head:
                raise flatbuffers.builder.StructIsNotInlineError(
                    "flatbuffers: Tried to write a Struct at an Offset that is different from the "
                    "current Offset of the Builder."
                )
            self.current_vtable[slot] = x

    def CreateByteVector(self, x: bytes) -> int:
        if self.nested:
            raise flatbuffers.builder.IsNestedError()
        if not isinstance(x, (bytes, bytearray)):
            raise TypeError("non-byte vector passed to CreateByteVector")
        length = len(x)
        self.Prep(4, length)
        head = self.head - length
        self.Bytes[head : head + length] = x
        head -= 4
        _PACK_U32(self.Bytes, head, length)
        self.head = head
        self.vectorNumElems = None
        return len(self.Bytes) - head

    def create_id(self, value: ULID | uuid.UUID) -> int:
        """Write a Ulid or Uuid struct for ``value``; returns its offset.

        Equivalent to the generated ``CreateUlid(self, high, low)`` / ``CreateUuid`` -- both do
        ``Prep(8, 16)`` and prepend ``low`` then ``high`` as uint64 -- in one pack instead of five
        calls; :func:`_check_create_id` verifies that at import.
        """
        head = self.head
        if (head - len(self.Bytes)) & 7 or head < 16 or self.minalign < 8:
            self.Prep(8, 16)
            head = self.head
        head = self.head = head - 16
        STRUCT_ID.pack_into(self.Bytes, head, *ID_HALVES.unpack(value.bytes))
        return len(self.Bytes) - head


# --- reading ----------------------------------------------------------------------------------


class PayloadError(Exception):
    """The payload's structure is invalid (a required field is missing, an offset is out of range)."""


class _SlotProbe:
    """Stands in for ``flatbuffers.table.Table`` under a generated accessor.

    Records the vtable slot the accessor asks for and reports the field as absent, so the accessor
    returns the schema default. This way the fast decoder uses exactly the slots and defaults
    that flatc generated from manifest.fbs, instead of a hand-maintained copy of them.
    """

    Pos = 0
    Bytes = b""

    def __init__(self) -> None:
        self.slot = -1

    def Offset(self, slot: int) -> int:  # flatbuffers.table.Table interface
        self.slot = slot
        return 0


def _slot_and_default(table_cls: type[Any], accessor: str) -> tuple[int, Any]:
    """The vtable slot and default value of ``table_cls.accessor`` (a generated accessor that
    takes no arguments: a scalar, a struct or table field, or ``<Vector>Length``)."""
    obj = table_cls()
    probe = _SlotProbe()
    obj._tab = probe
    default = getattr(obj, accessor)()
    if probe.slot < 4:
        raise AssertionError(f"{table_cls.__name__}.{accessor} did not read a vtable slot")
    return probe.slot, default


def vtable_slot(table_cls: type[Any], accessor: str) -> int:
    return _slot_and_default(table_cls, accessor)[0]


# Wire types of the fields the fast path reads. Offsets (to vectors and tables) are uoffsets
# relative to the field's own position; Ulid/Uuid structs are two ulongs stored inline.
OFFSET = "offset"
ULONG = "ulong"
UINT = "uint"
ID = "id"
_STRUCT_CODES = {OFFSET: "I", ULONG: "Q", UINT: "I", ID: "QQ"}


class Layout:
    """How to read every field of the tables that share one vtable (the builder deduplicates
    vtables, so all SSTs typically share one or two): one ``unpack_from`` at the table's position
    gives the present fields in their stored order; appending the absent fields' defaults and
    picking yields the fields in declaration order."""

    __slots__ = ("field_offsets", "read")

    def __init__(self, read: Callable[[bytes, int], tuple[Any, ...]], field_offsets: tuple[int, ...]) -> None:
        self.read = read
        # Per field (in declaration order): its offset from the table's start, 0 if absent.
        self.field_offsets = field_offsets


class TableReader:
    """Reads tables of one generated type with a single ``struct.unpack_from`` each.

    ``fields`` are ``(accessor, wire type, required)`` in the order the caller wants them; the
    vtable slot and default of each come from the generated accessor. Absent ``ID`` fields read
    as ``(None, None)``, absent offsets as 0. Immutable, so shared by concurrent decodes.
    """

    def __init__(self, table_cls: type[Any], fields: Sequence[tuple[str, str, bool]]) -> None:
        self.name = table_cls.__name__
        self._fields: list[tuple[str, int, str, bool, tuple[Any, ...]]] = []
        for accessor, kind, required in fields:
            slot, default = _slot_and_default(table_cls, accessor)
            if kind == ID:
                defaults: tuple[Any, ...] = (None, None)
            elif kind == OFFSET:
                defaults = (0,)
            else:
                defaults = (default,)
            self._fields.append((accessor, slot, _STRUCT_CODES[kind], required, defaults))
        if sum(len(code) for _, _, code, _, _ in self._fields) < 2:
            raise AssertionError("itemgetter needs at least two values")

    def compile(self, buf: bytes, vtable: int) -> Layout:
        """The layout of this type's tables whose vtable is at ``vtable``."""
        if vtable < 0 or vtable + 4 > len(buf):
            raise PayloadError(f"{self.name} vtable at {vtable} is outside the buffer")
        vtable_size, object_size = struct.unpack_from("<HH", buf, vtable)
        if vtable_size < 4 or vtable_size % 2 or vtable + vtable_size > len(buf):
            raise PayloadError(f"{self.name} vtable at {vtable} has invalid size {vtable_size}")
        present: list[tuple[int, int]] = []  # (offset in the table, field index)
        field_offsets: list[int] = []
        for index, (accessor, slot, code, required, _) in enumerate(self._fields):
            offset = _U16.unpack_from(buf, vtable + slot)[0] if slot < vtable_size else 0
            if offset:
                if offset < 4 or offset + struct.calcsize("<" + code) > object_size:
                    raise PayloadError(f"{self.name}.{accessor} at offset {offset} is outside the table")
                present.append((offset, index))
            elif required:
                raise PayloadError(f"{self.name} lacks required field {accessor}")
            field_offsets.append(offset)
        # One struct over the present fields in stored order, skipping padding between them.
        fmt, cursor, unpacked = ["<"], 0, 0
        first_value: dict[int, int] = {}  # field index -> index of its first unpacked value
        for offset, index in sorted(present):
            if offset < cursor:
                raise PayloadError(f"{self.name} vtable at {vtable} has overlapping fields")
            code = self._fields[index][2]
            fmt.append(f"{offset - cursor}x{code}")
            first_value[index] = unpacked
            unpacked += len(code)
            cursor = offset + struct.calcsize("<" + code)
        # Absent fields' defaults go after the unpacked values; pick restores declaration order.
        tail: list[Any] = []
        picks: list[int] = []
        for index, (_, _, code, _, defaults) in enumerate(self._fields):
            if index in first_value:
                picks.extend(range(first_value[index], first_value[index] + len(code)))
            else:
                picks.extend(range(unpacked + len(tail), unpacked + len(tail) + len(defaults)))
                tail.extend(defaults)
        unpack_from = struct.Struct("".join(fmt)).unpack_from
        pick = itemgetter(*picks)
        tail_values = tuple(tail)

        def read(buf: bytes, pos: int) -> tuple[Any, ...]:
            return pick(unpack_from(buf, pos) + tail_values)  # type: ignore[no-any-return]

        return Layout(read, tuple(field_offsets))


class LayoutCache:
    """The layouts of one payload's tables of one type, by vtable position."""

    __slots__ = ("buf", "layouts", "reader")

    def __init__(self, reader: TableReader, buf: bytes) -> None:
        self.reader = reader
        self.buf = buf
        self.layouts: dict[int, Layout] = {}

    def compile(self, vtable: int) -> Layout:
        layout = self.layouts[vtable] = self.reader.compile(self.buf, vtable)
        return layout

    def of(self, pos: int) -> Layout:
        """The layout of the table at ``pos`` (the hot loops inline this)."""
        vtable = pos - I32.unpack_from(self.buf, pos)[0]
        return self.layouts.get(vtable) or self.compile(vtable)


def table_positions(tab: Any, slot: int, what: str) -> list[int]:
    """Absolute positions of the tables in the vector at ``slot`` of ``tab`` (a generated table's
    ``_tab``); an absent vector is empty."""
    o = tab.Offset(slot)
    if not o:
        return []
    start = tab.Vector(o)
    count = tab.VectorLen(o)
    buf = tab.Bytes
    if start + 4 * count > len(buf):
        raise PayloadError(f"{what}: {count} entries do not fit in the buffer")
    rel = struct.unpack_from(f"<{count}I", buf, start)
    return list(map(add, range(start, start + 4 * count, 4), rel))


def required_table_positions(tab: Any, slot: int, what: str) -> list[int]:
    if not tab.Offset(slot):
        raise PayloadError(f"required vector {what} is missing")
    return table_positions(tab, slot, what)
