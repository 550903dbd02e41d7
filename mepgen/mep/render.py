"""mep.yaml written for people: one line per parameter, todos marked next to what they concern (harness.cu and
the Makefile are rendered by mepgen.harness, below both the mep and the evaluate stage)."""
from __future__ import annotations

import re

import yaml

from ..spec import Spec

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
