"""The `__constant__` and `__device__` variables a kernel reads, as a mep.yaml's `constants`: arrays with the values
the application copies in (or random ones where it computes them at run time), records with a C++ initializer,
variable templates per instantiation, and a `__device__` variable the kernel writes as an output."""
from __future__ import annotations

import re

from ..spec import Constant, Init, Todo
from . import counts, infer, vartmpl
from .origins import constant_source
from .project import Project
from .records import record_of_element
from .resolve import Resolver


def device_constants(project: Project, kernel: dict, resolver: Resolver, todo: list[Todo], cursor=None,
               targs: dict[str, str] | None = None) -> list[Constant]:
    out = []
    for g in kernel["closure"]["globals"]:
        if g.get("space") not in ("constant", "device"):
            continue
        if g.get("variable_template"):
            out += _template_constants(project, g, resolver, todo, cursor, targs or {}, len(out))
            continue
        decl = project.find_global(g["qualified_name"])
        if decl is None:
            continue
        t = decl.type.get_canonical()
        ctype = decl.type.spelling
        value = constant_source(resolver, decl.get_usr())
        if t.kind.name == "CONSTANTARRAY":
            dtype, count = infer.dtype_of(t.element_type.get_canonical().spelling, {}), str(t.element_count)
            record = record_of_element(t.element_type) if dtype is None else None
            if record is not None:        # `__constant__ float4 taps[4]`: kept as 16 floats
                dtype, count = record.dtype, str(t.element_count * record.lanes)
            elif dtype is None:           # records of mixed fields: their bytes only a run of the application has
                size = max(t.get_size(), 0)
                todo.append(Todo(f"constants[{len(out)}].init", f"{g['qualified_name']} ({ctype}) holds records of "
                                 f"mixed fields mepgen cannot generate; give its {size} bytes as an init of kind "
                                 f"file, or record them from a run: `mepgen capture {kernel['qualified_name']} -- "
                                 "./app ARGS`"))
                out.append(Constant(g["qualified_name"], ctype, "uint8", str(size), Init("zeros"),
                                    note="bytes of records mepgen cannot generate: zeros until completed"))
                continue
            nums = _numbers(value)
            if nums is not None and len(nums) and int(count) % len(nums) == 0:
                init, note = Init("values", {"values": nums}), "values copied in by the application"
            else:
                init, note = _random_init(dtype), "the application computes it at run time: random values"
            out.append(_output_if_written(Constant(g["qualified_name"], ctype, dtype, count, init, note=note), g))
        elif t.kind.name == "RECORD":
            if value is None:
                value = f"{counts.unparen(re.sub(r'^const ', '', t.spelling))}{{}}"
                todo.append(Todo(f"constants[{len(out)}].value", f"{g['qualified_name']} ({ctype}) gets no traceable "
                                 "value from the application; write a C++ initializer"))
            note = "initializer from the application's cudaMemcpyToSymbol"
            if g.get("written") and g.get("space") == "device":
                note += ("; the kernel writes it, but a record of mixed fields is not compared as an output (give it "
                         "a dtype, a count and an init of kind file to compare its bytes)")
            out.append(Constant(g["qualified_name"], ctype, value=counts.unparen(value), note=note))
        else:
            dtype = infer.dtype_of(t.spelling, {})
            nums = _numbers(value)
            init = Init("values", {"values": nums}) if nums else _random_init(dtype)
            out.append(_output_if_written(Constant(g["qualified_name"], ctype, dtype, "1", init), g))
    return out


def _output_if_written(c: Constant, g: dict) -> Constant:
    """A `__device__` variable the kernel (or code it calls) writes (extract's `written`, global_writes.py) is an
    output of the MEP: role inout, compared like an inout buffer."""
    if g.get("written") and g.get("space") == "device" and c.dtype:
        c.role = "inout"
        c.note = (f"{c.note}; " if c.note else "") + "the kernel writes it: compared as an output"
    return c


def _template_constants(project: Project, g: dict, resolver: Resolver, todo: list[Todo], cursor,
                        targs: dict[str, str], at: int) -> list[Constant]:
    """The instantiations of a variable template the launched kernel reads (`taps<double>`), as arrays."""
    out = []
    for inst in vartmpl.instances(project, g, cursor, targs):
        i = at + len(out)
        dtype = infer.dtype_of(inst.element, {}) if inst.element else None
        if inst.why or dtype is None:
            why = inst.why or f"{inst.symbol} holds {inst.element} elements, which mepgen cannot generate; give " \
                              "its bytes as an init of kind file"
            todo.append(Todo(f"constants[{i}]" if inst.why else f"constants[{i}].init", why))
            out.append(Constant(inst.symbol, inst.ctype or "?", "uint8", "0", Init("zeros"),
                                note="not derived: see the todo"))
            continue
        value = constant_source(resolver, g["usr"], names=lambda a: vartmpl.refers_to(a, g, inst))
        nums = _numbers(value)
        if nums is not None and len(nums) and int(inst.count) % len(nums) == 0:
            init, note = Init("values", {"values": nums}), "values copied in by the application"
        else:
            init, note = _random_init(dtype), "the application computes it at run time: random values"
        out.append(Constant(inst.symbol, inst.ctype, dtype, inst.count, init, note=note))
    return out


def _random_init(dtype: str | None) -> Init:
    return Init("uniform", {"low": -1.0, "high": 1.0}) if dtype and dtype.startswith("float") \
        else Init("uniform", {"low": 0, "high": 15})


def _numbers(value: str | None) -> list | None:
    if value is None:
        return None
    items = [x.strip() for x in counts.unparen(value).strip("{} ").split(",")]
    out = []
    for x in items:
        try:
            out.append(float(x.rstrip("fF")) if re.search(r"[.eE]", x) else int(x, 0))
        except ValueError:
            return None
    return out
