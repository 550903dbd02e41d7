"""Kernel chains: earlier launches in the same host function whose output the target reads.

`spmv_csr<<<...>>>(n, A.row_ptr, A.col_idx, A.vals, x, Ap); ... axpy<float><<<...>>>(n, -1.0f, Ap, r);`:
axpy's input `Ap` is what spmv_csr wrote. The MEP of axpy can run spmv_csr first (`mepgen mep --chain`)
so that axpy sees the values the application gives it, not random ones.

Detection is strict, by the launch sites' text in source order within one function: for each input of the
target passed as a plain variable (`Ap`, `A.vals`), the nearest earlier launch that passes the same
spelling decides. A launch that only reads it is skipped; one whose parameter there is `out` (as mepgen
infers it for that kernel's own MEP) feeds it; anything else ends the search with a reason (an `inout`
writer, an expression, another kind of launch). Between the feeder and the target the variable may only
appear as the source of a cudaMemcpy*; any other use (a cudaMemcpy*/cudaMemset* into it, a call that takes
it, an assignment) is a write mepgen cannot rule out, so nothing is chained and the note says why. A chain
is one level deep: a feeder's own inputs are generated like any input.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..cexpr import split_top_level
from ..errors import MepgenError
from ..spec import Buffer, ChainArg, ChainStep, Init, Spec, Todo
from .project import Project
from .symbols import Symbols
from .assemble import assemble

_VAR = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_COPY = re.compile(r"\b(cudaMemcpy\w*)\s*\(")


@dataclass
class Feeder:
    kernel: dict                          # the inventory's kernel
    site: dict                            # the inventory's launch site
    spec: Spec                            # the feeder's own spec at that site (size symbols shared with the target)
    feeds: dict[str, str] = field(default_factory=dict)   # target parameter -> feeder parameter it writes

    @property
    def where(self) -> str:
        return f"{self.site['file']}:{self.site['line']}"


@dataclass
class Detection:
    feeders: list[Feeder]                 # in source order
    notes: list[str]                      # why an input was not chained (for the reader)


def _blank_comments(text: str) -> str:
    """Comments replaced by spaces (offsets kept)."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.S)


def _uses(var: str, text: str) -> list[int]:
    return [m.start() for m in re.finditer(rf"(?<![\w.>]){re.escape(var)}(?!\w)", text)]


def _copy_source_only(stmt: str, var: str) -> bool:
    """Whether every use of `var` in the statement is a cudaMemcpy*'s source (an argument after the first)."""
    m = _COPY.search(stmt)
    if m is None:
        return False
    depth, end = 0, None
    for i in range(m.end() - 1, len(stmt)):
        depth += {"(": 1, ")": -1}.get(stmt[i], 0)
        if depth == 0:
            end = i
            break
    if end is None:
        return False
    args = split_top_level(stmt[m.end():end])
    outside = stmt[:m.start()] + stmt[end + 1:]
    return bool(args) and not _uses(var, args[0]) and not _uses(var, outside)


def _between(app_root: Path, feeder: dict, target: dict, var: str, skip: list[dict]) -> str | None:
    """Why `var` may be written between the feeder's launch and the target's, or None when it is not."""
    data = (app_root / target["file"]).read_bytes().decode("latin-1")    # one char per byte: offsets hold
    text = list(_blank_comments(data))
    for s in skip:                                  # launches in between that only read it
        for i in range(s["start_byte"], s["end_byte"]):
            text[i] = " "
    text = "".join(text)
    lo, hi = feeder["end_byte"], target["start_byte"]
    region = text[lo:hi]
    for stmt_start, stmt in _statements(region):
        if not _uses(var, stmt) or _copy_source_only(stmt, var):
            continue
        line = data.count("\n", 0, lo + stmt_start + len(stmt) - len(stmt.lstrip())) + 1
        return f"`{var}` is used at {target['file']}:{line} (`{' '.join(stmt.split())[:80]}`) in between"
    return None


def _statements(region: str):
    start = 0
    for m in re.finditer(r"[;{}]", region):
        yield start, region[start:m.start()]
        start = m.end()
    yield start, region[start:]


def _sites_before(inv: dict, target: dict) -> list[tuple[dict, dict]]:
    """(kernel, site) of the launches before the target in its function, nearest first."""
    out = []
    for k in inv["kernels"]:
        for s in k["launch_sites"]:
            if s["enclosing_usr"] == target["enclosing_usr"] and s["file"] == target["file"] \
                    and s["start_byte"] < target["start_byte"]:
                out.append((k, s))
    return sorted(out, key=lambda ks: ks[1]["start_byte"], reverse=True)


def detect(project: Project, inv: dict, kernel: dict, spec: Spec, site: dict, symbols: Symbols,
           sizes_override: dict[str, int]) -> Detection:
    """The launches that feed the target's inputs at `site` (the one its MEP reproduces)."""
    specs: dict[tuple, Spec | str] = {}

    def spec_of(k: dict, s: dict) -> Spec | str:
        key = (s["file"], s["start_byte"])
        if key not in specs:
            try:
                specs[key] = assemble(project, inv, k, dict(sizes_override), detect_gpu=False, site=s,
                                      symbols=symbols)[0]
            except MepgenError as e:
                specs[key] = str(e)
            except Exception as e:   # a site the inference cannot read: no chain, and the note says so
                specs[key] = f"{type(e).__name__}: {e}"
        return specs[key]

    feeders: dict[tuple, Feeder] = {}
    notes: list[str] = []
    if site["kind"] != "triple_chevron":
        return Detection([], [])
    earlier = _sites_before(inv, site)
    for i, p in enumerate(spec.params):
        if p.role not in ("in", "inout") or i >= len(site["args"]):
            continue
        var = site["args"][i].strip()
        if not _VAR.fullmatch(var):
            continue
        readers = []
        for k, s in earlier:
            hits = [j for j, t in enumerate(s["args"]) if _uses(var, t)]
            if not hits:
                continue
            name = f"{k['qualified_name']} at {s['file']}:{s['line']}"
            if s["kind"] != "triple_chevron":
                notes.append(f"`{p.name}` is passed to {name} ({s['kind']}): not chained")
                break
            if any(s["args"][j].strip() != var for j in hits):
                notes.append(f"`{p.name}` ({var}) is passed to {name} inside an expression: not chained")
                break
            fspec = spec_of(k, s)
            if isinstance(fspec, str):
                notes.append(f"`{p.name}` ({var}) is passed to {name}, whose MEP spec fails ({fspec}): not chained")
                break
            roles = {fspec.params[j].role for j in hits if j < len(fspec.params)}
            if roles <= {"in"}:
                readers.append(s)
                continue
            if roles != {"out"}:
                notes.append(f"`{p.name}` ({var}) is written by {name} as {'/'.join(sorted(roles))}: its value "
                             "also depends on what came before, so it is not chained")
                break
            if s.get("loop_depth", 0) != site.get("loop_depth", 0):
                notes.append(f"`{p.name}` ({var}) is written by {name} at another loop depth: not chained")
                break
            why = _between(project.app_root, s, site, var, readers)
            if why:
                notes.append(f"`{p.name}` ({var}) is written by {name}, but {why}: not chained")
                break
            key = (s["file"], s["start_byte"])
            f = feeders.setdefault(key, Feeder(k, s, fspec))
            f.feeds[p.name] = fspec.params[hits[0]].name
            break
    return Detection(sorted(feeders.values(), key=lambda f: f.site["start_byte"]), notes)


def describe(d: Detection) -> list[str]:
    """One note per fed input, for a spec built without the chain."""
    return [f"`{param}` is fed by {f.kernel['qualified_name']} at {f.where} (its `{fp}`); `mepgen mep "
            f"--chain` runs it in the MEP" for f in d.feeders for param, fp in f.feeds.items()]


def apply(spec: Spec, d: Detection, site: dict) -> list[str]:
    """Add the chain to `spec`: steps, chain buffers, fed inits, merged sizes; returns notes."""
    notes = []
    fed_by: dict[str, int] = {}
    for n, f in enumerate(d.feeders):
        for param in f.feeds:
            fed_by[param] = n
    taken = {p.name for p in spec.params}
    target_vars = {site["args"][i].strip(): p for i, p in enumerate(spec.params)
                   if i < len(site["args"]) and p.role in ("in", "inout")}
    for n, f in enumerate(d.feeders):
        kname = f.kernel["qualified_name"]
        short = kname.split("::")[-1]
        step = ChainStep(kname, f.spec.launch.callee, list(f.spec.launch.grid), list(f.spec.launch.block),
                         f.spec.launch.shared_mem, site=f.where)
        for j, fp in enumerate(f.spec.params):
            if fp.role == "scalar":
                step.args.append(ChainArg(fp.name, "scalar", fp.ctype, fp.dtype, value=fp.value))
                continue
            var = f.site["args"][j].strip() if j < len(f.site["args"]) else None
            q = target_vars.get(var)
            shares = q is not None and q.dtype == fp.dtype and (
                (fp.role == "out" and fed_by.get(q.name) == n and f.feeds.get(q.name) == fp.name)
                or (fp.role == "in" and fed_by.get(q.name, -1) < n))
            if shares:
                step.args.append(ChainArg(fp.name, fp.role, fp.ctype, fp.dtype, buffer=q.name))
                continue
            name, k = f"{short}_{fp.name}", 2
            while name in taken:
                name, k = f"{short}_{fp.name}_{k}", k + 1
            taken.add(name)
            spec.buffers.append(Buffer(name, fp.ctype, fp.dtype, fp.count,
                                       fp.init if fp.role in ("in", "inout") else None,
                                       note=f"{kname}'s `{fp.name}` ({var}): {fp.note}"))
            step.args.append(ChainArg(fp.name, fp.role, fp.ctype, fp.dtype, buffer=name))
        spec.chain.append(step)
        for param, fp in f.feeds.items():
            p = spec.param(param)
            p.init = Init("chain", {"by": kname})
            p.note = (f"{p.note}; " if p.note else "") + f"fed by {kname} at {f.where} (its `{fp}`), run first"
        for sym, value in f.spec.sizes.items():
            if sym not in spec.sizes:
                spec.sizes[sym] = value
            elif spec.sizes[sym] != value:
                spec.todo.append(Todo(f"sizes.{sym}", f"{kname} (chain) needs {sym} = {value}, the target "
                                      f"{spec.sizes[sym]}: choose one"))
        known = {t.field for t in spec.todo}
        for t in f.spec.todo:
            if t.field.startswith("sizes.") and t.field in known:
                continue
            if t.field.startswith("sizes."):
                spec.todo.append(t)
            else:
                spec.todo.append(Todo(f"chain[{n}]", f"{kname}: {t.field}: {t.reason}", t.kind))
        if f.spec.constants:
            raise MepgenError(f"{kname} (feeding {', '.join(f.feeds)}) reads __constant__/__device__ symbols "
                              f"({', '.join(c.name for c in f.spec.constants)}); chains with constants are not "
                              "supported yet: cut the MEP without --chain")
        notes.append(f"chain: {kname} at {f.where} runs before the target and computes "
                     f"{', '.join(f.feeds)}")
    return notes
