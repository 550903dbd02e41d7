"""The rendered build files of an MEP: harness.cu and its Makefile (Jinja2 templates in templates/harness/).

Shared by the mep stage (which writes them) and the evaluate stage (which renders the harness again for another
launch configuration), so it sits below both."""
from __future__ import annotations

import copy
import functools
import re
import shlex

import jinja2

from . import mepbuild, perturb
from .datagen import const_file_name
from .harness_names import guard_names
from .spec import DTYPES, PLACEMENT_SPAN, Spec, is_fed
from .templating import template_loader

NPY_DESCR = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "int8": "|i1", "uint8": "|u1", "int16": "<i2",
             "uint16": "<u2", "int32": "<i4", "uint32": "<u4", "int64": "<i8", "uint64": "<u8", "bool": "|b1"}


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=template_loader("harness"),
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                              keep_trailing_newline=True)


def _wide(expr: str, sizes) -> str:
    """Count expressions in 64-bit, sizes spelled as the build defines them: `NX * NY` ->
    `(long long)(MEPGEN_SIZE_NX) * (long long)(MEPGEN_SIZE_NY)` (no int overflow)."""
    text = mepbuild.in_build(expr, sizes)
    return re.sub(r"\b(" + re.escape(mepbuild.SIZE_PREFIX) + r"\w+)\b", r"(long long)(\1)", text) if sizes else text


def render_harness(spec: Spec) -> str:
    """harness.cu; every expression of mep.yaml with its size symbols spelled as the build defines them."""
    return guard_names(_render_harness(_built_terms(spec)), spec)


def _built_terms(spec: Spec) -> Spec:
    """A copy of the spec whose launch, scalar values, constant values and chain use the build's size names
    (counts are converted where they are rendered, by _wide)."""
    s = copy.deepcopy(spec)
    b = lambda e: mepbuild.in_build(e, spec.sizes) if e is not None else None
    s.launch.grid = [b(e) for e in s.launch.grid]
    s.launch.block = [b(e) for e in s.launch.block]
    s.launch.shared_mem = b(s.launch.shared_mem)
    s.launch.callee = _callee_in_build(s.launch.callee, spec.sizes)
    for p in s.params:
        if p.role == "scalar":
            p.value = b(p.value)
    for c in s.constants:
        c.value = b(c.value)
    for step in s.chain:
        step.grid, step.block, step.shared_mem = [b(e) for e in step.grid], [b(e) for e in step.block], \
            b(step.shared_mem)
        step.callee = _callee_in_build(step.callee, spec.sizes)
        for a in step.args:
            if a.role == "scalar":
                a.value = b(a.value)
    return s


def _callee_in_build(callee: str, sizes) -> str:
    """Template arguments of a callee (`k<BLOCK>`) with sizes spelled as built; the kernel's name stays."""
    name, lt, rest = callee.partition("<")
    return name + lt + mepbuild.in_build(rest, sizes) if lt else callee


def _render_harness(spec: Spec) -> str:
    buffers = []
    args = []
    records = False
    perturbed = perturb.names(spec)
    struct_args = []            # scalars whose bytes hold device pointers (mep.yaml `relocate`, from a capture)
    relocations = []            # pointers inside buffers, written after the inputs are loaded
    for p in spec.params:
        if p.role == "scalar":
            if p.relocate:
                struct_args.append({"name": p.name, "value": p.value, "relocate": p.relocate})
                args.append(f"arg_{p.name}")
            else:
                args.append(p.value)
            continue
        for r in p.relocate or []:
            relocations.append({"holder": f"{'mep_init_' if p.role == 'inout' else 'd_'}{p.name}", **r})
        buffers.append({"name": p.name, "role": p.role, "ctype": DTYPES[p.dtype], "descr": NPY_DESCR[p.dtype],
                        "count": _wide(str(p.count), spec.sizes),
                        "poison": "0xFF" if p.dtype.startswith("float") else "0xA5", "placement": p.placement,
                        "fed": is_fed(p), "relocate": (p.relocate or []) if p.role == "in" else [],
                        "perturb": perturbed.index(p.name) if p.name in perturbed else None})
        # `char*`, `long*`, a typedef: the same bytes as the harness's buffer, another spelling (C++ keeps `char`
        # and `signed char` apart): passed through the conversion to the kernel's own pointer type
        respelled = _pointee(p.ctype) not in (None, DTYPES[p.dtype])
        records = records or bool(p.lanes) or respelled
        args.append(f"mep_record_ptr{{d_{p.name}}}" if p.lanes or respelled else f"d_{p.name}")
    constants = []
    symbol_outputs = []         # `__device__` variables the kernel writes: read back into a buffer after a kept run
    for c in spec.constants:
        if c.init is not None:
            constants.append({"symbol": c.name, "file": const_file_name(c.name), "descr": NPY_DESCR[c.dtype],
                              "count": _wide(str(c.count), spec.sizes), "index": sum(1 for x in constants if x["file"]) + 1})
        else:
            constants.append({"symbol": c.name, "file": None, "value": c.value})
        if c.role == "inout":
            symbol_outputs.append({"name": c.name, "symbol": c.name, "var": f"sym_{len(symbol_outputs)}",
                                   "ctype": DTYPES[c.dtype], "descr": NPY_DESCR[c.dtype],
                                   "count": _wide(str(c.count), spec.sizes)})
    chain_buffers = [{"name": b.name, "ctype": DTYPES[b.dtype], "descr": NPY_DESCR[b.dtype], "loaded": b.init is not None,
                      "count": _wide(str(b.count), spec.sizes), "role": b.role} for b in spec.buffers]
    relocations += [{"holder": f"{'mep_init_' if b.role == 'inout' else 'd_'}{b.name}", **r}
                    for b in spec.buffers for r in b.relocate or []]
    roles = {p.name: p.role for p in spec.params}
    chain = []
    for step in spec.chain:
        cargs = []
        for a in step.args:
            if a.role == "scalar":
                cargs.append(a.value)
            else:   # a target input: the device copy its runs start from (inout: the reset source)
                ptr = f"mep_init_{a.buffer}" if roles.get(a.buffer) == "inout" else f"d_{a.buffer}"
                cargs.append(f"mep_record_ptr{{{ptr}}}")
        chain.append({"kernel": step.kernel, "callee": step.callee, "grid": step.grid, "block": step.block,
                      "shared_mem": step.shared_mem, "args": cargs, "site": step.site})
    return _env().get_template("harness.cu.j2").render(
        kernel_name=spec.kernel.name, prelude_headers=mepbuild.PRELUDE_HEADERS, callee=spec.launch.callee,
        buffers=buffers, args=args, constants=constants, symbol_outputs=symbol_outputs,
        records=records or bool(chain), placement_span=PLACEMENT_SPAN, chain=chain, chain_buffers=chain_buffers,
        struct_args=struct_args, relocations=relocations,
        # only when a buffer holds halves: legacy code may define its own `half` at global scope
        fp16=any(x.dtype == "float16" for x in [*spec.params, *spec.constants]),
        perturbed=bool(perturbed), grid=spec.launch.grid, block=spec.launch.block, shared_mem=spec.launch.shared_mem,
        warmup=spec.timing.warmup, reps=spec.timing.reps, flush=spec.timing.flush_l2)


def render_makefile(spec: Spec) -> str:
    flags = " ".join(shlex.quote(f).replace("$", "$$") for f in mepbuild.build_flags(spec))
    return _env().get_template("Makefile.j2").render(kernel_name=spec.kernel.name, flags=flags)


def _pointee(ctype: str | None) -> str | None:
    """`const char * __restrict__` -> `char`: the element type a pointer parameter spells (None: no pointer)."""
    if not ctype or "*" not in ctype:
        return None
    words = [w for w in ctype.split("*", 1)[0].replace("\t", " ").split(" ")
             if w and w not in ("const", "volatile", "__restrict__", "__restrict", "restrict")]
    return " ".join(words) or None

