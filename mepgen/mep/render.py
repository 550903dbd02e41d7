"""The rendered files of an MEP: harness.cu and Makefile (Jinja2 templates in templates/harness/), and
mep.yaml written for people: one line per parameter, todos marked next to what they concern."""
from __future__ import annotations

import functools
import re
import shlex

import jinja2
import yaml

from .. import mepbuild
from ..datagen import const_file_name
from ..evaluate import perturb
from ..spec import DTYPES, PLACEMENT_SPAN, Spec, is_fed
from ..templating import template_loader

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
    from .harness_names import guard_names
    return guard_names(_render_harness(_built_terms(spec)), spec)


def _built_terms(spec: Spec) -> Spec:
    """A copy of the spec whose launch, scalar values, constant values and chain use the build's size names
    (counts are converted where they are rendered, by _wide)."""
    import copy
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
                        "fed": is_fed(p),
                        "perturb": perturbed.index(p.name) if p.name in perturbed else None})
        # `char*`, `long*`, a typedef: the same bytes as the harness's buffer, another spelling (C++ keeps `char`
        # and `signed char` apart): passed through the conversion to the kernel's own pointer type
        respelled = _pointee(p.ctype) not in (None, DTYPES[p.dtype])
        records = records or bool(p.lanes) or respelled
        args.append(f"mep_record_ptr{{d_{p.name}}}" if p.lanes or respelled else f"d_{p.name}")
    constants = []
    for c in spec.constants:
        if c.init is not None:
            constants.append({"symbol": c.name, "file": const_file_name(c.name), "descr": NPY_DESCR[c.dtype],
                              "count": _wide(str(c.count), spec.sizes), "index": sum(1 for x in constants if x["file"]) + 1})
        else:
            constants.append({"symbol": c.name, "file": None, "value": c.value})
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
        buffers=buffers, args=args, constants=constants,
        records=records or bool(chain), placement_span=PLACEMENT_SPAN, chain=chain, chain_buffers=chain_buffers,
        struct_args=struct_args, relocations=relocations,
        # only when a buffer holds halves: legacy code may define its own `half` at global scope
        fp16=any(x.dtype == "float16" for x in [*spec.params, *spec.constants]),
        perturbed=bool(perturbed), grid=spec.launch.grid, block=spec.launch.block, shared_mem=spec.launch.shared_mem,
        warmup=spec.timing.warmup, reps=spec.timing.reps, flush=spec.timing.flush_l2)


def render_makefile(spec: Spec) -> str:
    flags = " ".join(shlex.quote(f).replace("$", "$$") for f in mepbuild.build_flags(spec))
    return _env().get_template("Makefile.j2").render(kernel_name=spec.kernel.name, flags=flags)


def _flow(obj) -> str:
    return yaml.safe_dump(obj, default_flow_style=True, sort_keys=False, width=10 ** 6).strip()


def _at(field: str, place: str) -> bool:
    """Whether a field path (`params[1].count`) is at or below a place (`params[1]`), not at `params[10]`."""
    return field == place or field.startswith(place + ".")


def render_yaml(spec: Spec, header: list[str], marks: list[tuple[str, str]] = ()) -> str:
    """mep.yaml: the spec in the documented key order, each todo also as a comment at the field it names, and
    each of `marks` (field, comment: what the LLM proposed) likewise."""
    d = spec.to_dict()

    def marked(place: str) -> list[str]:
        return [_comment(text, "  ") for f, text in marks if _at(f, place)]
    lines = [_comment(h) for h in header]
    lines += [f"version: {d['version']}", f"kernel: {_flow(d['kernel'])}"]
    sizes = d.get("sizes", {})            # to_dict leaves out an empty mapping: a launch of literals has none
    lines.append("sizes:                 # size symbols: passed to nvcc as -DMEPGEN_SIZE_<SYM>=<value>; scale them freely"
                 if sizes else "sizes: {}              # none: every count and dimension is a literal")
    for name, value in sizes.items():
        mark = [t.reason for t in spec.todo if t.field == f"sizes.{name}"]
        mark += [f"a placeholder: see the todo of {t.field}" for t in spec.todo
                 if t.field != f"sizes.{name}" and re.search(rf"\bsizes\.{re.escape(name)}\b", t.reason)]
        lines += [_comment(f"TODO(mepgen): {r}", "  ") for r in mark] + marked(f"sizes.{name}")
        lines.append(f"  {_flow({name: value})[1:-1]}")
    for group in ("params", "constants"):
        items = d.get(group, [])
        if not items:                     # a kernel without parameters, or without constants
            lines.append(f"{group}: []")
            continue
        lines.append(f"{group}:")
        for i, item in enumerate(items):
            note = item.pop("note", None)
            if note:
                lines.append(_comment(f"{item['name']}: {note}", "  "))
            lines += [_comment(f"TODO(mepgen): {t.reason}", "  ") for t in spec.todo if _at(t.field, f"{group}[{i}]")]
            lines += marked(f"{group}[{i}]")
            lines.append(f"  - {_flow(item)}")
    lines += [_comment(f"TODO(mepgen): {t.reason}", "  ") for t in spec.todo if _at(t.field, "launch")]
    lines += [line.strip() for line in marked("launch")]
    for key in ("launch", "build", "verify", "timing", "work"):
        if key in d:
            lines.append(f"{key}: {_flow(d[key])}")
    if d.get("chain"):
        lines.append("# launches run in this order before the target, once per input set (never timed); what they")
        lines.append("# write into the target's inputs is their `init: {kind: chain}` (docs/mep-format.md)")
        lines.append("chain:")
        for i, step in enumerate(d["chain"]):
            lines += [_comment(f"TODO(mepgen): {t.reason}", "  ") for t in spec.todo if t.field == f"chain[{i}]"]
            args = step.pop("args")
            for j, (key, value) in enumerate(step.items()):
                text = _flow(value) if isinstance(value, (dict, list)) else _flow([value])[1:-1]
                lines.append(f"  {'- ' if j == 0 else '  '}{key}: {text}")
            lines.append("    args:")
            lines += [f"      - {_flow(a)}" for a in args]
    if d.get("buffers"):
        lines.append("buffers:               # used only by the chain; generated into data/in/<name>.npy when they have an init")
        for b in d["buffers"]:
            note = b.pop("note", None)
            if note:
                lines.append(_comment(f"{b['name']}: {note}", "  "))
            lines.append(f"  - {_flow(b)}")
    lines.append("# what mepgen could not infer; `mepgen mep` exits 3 while this is not empty. Fix the fields, then")
    lines.append("# empty this list and run `mepgen mep KERNEL --refresh`.")
    lines.append("todo:" + (" []" if not spec.todo else ""))
    for t in spec.todo:
        lines.append(f"  - {_flow({'field': t.field, 'reason': t.reason, 'kind': t.kind})}")
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    """A reason as one comment line: a newline inside it would end the YAML comment."""
    return " ".join(str(text).split())


def _comment(text, indent: str = "") -> str:
    """One YAML comment line whatever `text` holds (a note quoting a condition written over several lines of
    the application's source): its own line breaks would end the comment and leave the rest as YAML."""
    return f"{indent}# {_one_line(text)}"


def _pointee(ctype: str | None) -> str | None:
    """`const char * __restrict__` -> `char`: the element type a pointer parameter spells (None: no pointer)."""
    if not ctype or "*" not in ctype:
        return None
    words = [w for w in ctype.split("*", 1)[0].replace("\t", " ").split(" ")
             if w and w not in ("const", "volatile", "__restrict__", "__restrict", "restrict")]
    return " ".join(words) or None

