"""Buffers of records: a pointer to a CUDA vector type (`float4`, `double2`, `int2`) or to a plain struct
whose fields all have one numeric type (`struct Particle { float x, y, z, vx, vy, vz; }`, `float pos[3]`).

The MEP keeps such a buffer as its scalar elements (`float32`, LANES per record), so that inputs are
generated, poisoned, saved and compared like any other buffer, and hands it to the kernel as the record
pointer the kernel declares. A struct with mixed field types, padding, bit-fields or nested records of
other types is not a record here: mepgen asks a person for its dtype.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..spec import C_TYPES


@dataclass
class Record:
    type_name: str      # as clang spells the pointee: `float4`, `Particle`
    dtype: str          # numpy dtype of every field
    lanes: int          # fields per record
    size: int           # bytes per record (lanes * itemsize: no padding)


def _scalar(t) -> tuple[str, int] | None:
    """(dtype, count) of a field type: a numeric scalar or a fixed array of one."""
    t = t.get_canonical()
    if t.kind.name == "CONSTANTARRAY":
        inner = _scalar(t.element_type)
        return (inner[0], inner[1] * t.element_count) if inner else None
    dtype = C_TYPES.get(t.spelling.replace("const ", "").replace("volatile ", "").strip())
    return (dtype, 1) if dtype else None


def record_of(pointer_type) -> Record | None:
    """The record a pointer parameter's type points to, or None when it is not one (see the module doc)."""
    return record_of_element(pointer_type.get_canonical().get_pointee())


def record_of_element(pointee) -> Record | None:
    """The record an element type is (`float4`, a struct of one numeric type), or None."""
    pointee = pointee.get_canonical()
    decl = pointee.get_declaration()
    if decl is None or decl.kind.name not in ("STRUCT_DECL", "CLASS_DECL"):
        return None
    dtype, lanes = None, 0
    for f in decl.get_children():
        k = f.kind.name
        if k in ("CXX_BASE_SPECIFIER",) or (k == "FIELD_DECL" and f.is_bitfield()):
            return None
        if k != "FIELD_DECL":
            continue
        s = _scalar(f.type)
        if s is None or (dtype is not None and s[0] != dtype):
            return None
        dtype, lanes = s[0], lanes + s[1]
    if dtype is None:
        return None
    size = pointee.get_size()
    if size != lanes * np.dtype(dtype).itemsize:      # padding, or something libclang could not size
        return None
    name = pointee.spelling.replace("const ", "").replace("volatile ", "").replace("struct ", "").strip()
    return Record(name, dtype, lanes, size)


def scaled(count: str, lanes: int) -> str:
    """A count of records as a count of scalar elements."""
    if lanes == 1:
        return count
    simple = count.replace("_", "").isalnum()
    return f"{count} * {lanes}" if simple else f"({count}) * {lanes}"


