"""The kernel's parameters searched together, as one space next to the rewrites (Kernel Tuner style):

- `block`: the block size or shape (launch_config's values and its analysis: the grid follows the block),
  where the launch alone sets it;
- `size:SYM`: a size symbol of mep.yaml that is one of the kernel's own tunables: the launch spells it (its block
  or grid) and so does the kernel (`__shared__ float s[BLOCK]`, `i = blockIdx.x * BLOCK + ...`, elements per
  thread), while no buffer's count, scalar's value, constant or tolerance does, so changing it changes the work
  decomposition and nothing else. Its values are powers of two around the application's. The candidate spells the
  new value in the kernel's own text (each use of SYM in its definition) and in its launch, so that the patch
  stage writes both back together: refused where a function the kernel calls, a macro it uses, or the template
  arguments of its launch spell SYM (a use the rewrite would not see);
- `bounds`: `__launch_bounds__(threads, k)` with the block's thread count (0: none), where the kernel has none;
- `regs`: a register cap (0: none), written in the kernel as `__maxnreg__(N)` (CUDA 12.4 on) so that the patch stage
  carries it into the application with the text; where the kernel has `__launch_bounds__` (its own, or the point's
  `bounds`), which nvcc does not allow beside `__maxnreg__`, as nvcc's `-maxrregcount=N` for the file, which
  patch cannot write back (it says so: a build flag is the application's to add).

Every point is a candidate like any other: built, verified on every input set by the judge (a point that
changes the decomposition must compute the same result) and timed. The library's tuning strategy (hill climbing
with random restarts, tuning.py) walks the space with the evaluator's verdicts as costs, one point per round.
A point equal to the kernel as it is (every axis at its current value) is never proposed.

Kernel Tuner (PyPI `kernel-tuner`) was weighed, not adopted: its strategies run inside `tune_kernel`, which owns the
build, the launch, the timing and the check of each configuration through its own backends (a kernel string and
host-side arguments), while here every point must go through mepgen's evaluator (the MEP's harness, the sandbox,
verification on every input set, timing against the original interleaved), asked for in rounds by the search
(ask/tell). Using only its strategies would mean faking its runner and cost-function internals for a space of at
most a few hundred points, which the library's hill climbing with random restarts (random + local search, measured
against random search in bench/tuning_strategies.py) already covers.
"""
from __future__ import annotations

import dataclasses
import json
import re

from .base import Rewrite, Transformation, block_threads, bound_threads, varying_block
from .launch_config import LaunchConfig, _threads
from .launch_facts import MARK, redefined_sizes
from .replicas import _functions
from .source import Refused

REGS = [0, 32, 48, 64, 96, 128]
BOUNDS = [0, 1, 2, 4]
MAX_THREADS = 1024


def _token(name: str) -> str:
    return rf"(?<![\w.]){re.escape(name)}(?![\w.])"


def spells(text: str, name: str) -> bool:
    return re.search(_token(name), str(text)) is not None


def _hidden_use(src, spec, sym: str) -> str | None:
    """Where the kernel reaches `sym` other than by spelling it in its own definition: a function it calls, a macro
    it uses, the template arguments of its launch."""
    for fn in _functions(src)[1:]:
        if fn.location.file is not None and fn.location.file.name == src.path:
            text = src.expand(src.text[fn.extent.start.offset:fn.extent.end.offset])
        else:
            text = " ".join(t.spelling for t in fn.get_tokens())
        if spells(text, sym):
            return f"{fn.spelling} (a function the kernel calls)"
    own = src.text[src.fn.extent.start.offset:src.span(src.body)[1]]
    if len(re.findall(_token(sym), src.expand(own))) > len(re.findall(_token(sym), own)):
        return "a macro the kernel uses"
    if any(spells(a, sym) for a in spec.kernel.template_args):
        return "the launch's template arguments"
    return None


def _describes_data(spec, sym: str) -> str | None:
    """What of mep.yaml other than the launch spells `sym` (a count, a value, a constant, a tolerance): then it is a
    problem size, not a tunable."""
    d = spec.to_dict()
    for key in ("params", "constants", "verify"):      # (work: an estimate for the roofline, not the problem)
        if key in d and spells(json.dumps(d[key]), sym):
            return key
    return None


def tunable_sizes(src, spec, launch) -> tuple[dict[str, list[int]], list[str]]:
    """Size symbol -> the values to try (the current one included), and why each other candidate is not one."""
    out, why = {}, []
    launch_text = " ".join(map(str, launch["grid"] + launch["block"] + [launch.get("shared_mem", "0")]))
    body = src.head + src.src(src.body)
    for sym, value in spec.sizes.items():
        if not spells(launch_text, sym):
            continue
        if not spells(body, sym):
            continue        # the launch alone sets it: the block axis covers it
        data = _describes_data(spec, sym)
        if data is not None:
            why.append(f"{sym}: mep.yaml's {data} use it (a problem size)")
            continue
        hidden = _hidden_use(src, spec, sym)
        if hidden is not None:
            why.append(f"{sym}: {hidden} spells it (the rewrite would not change that use)")
            continue
        if not isinstance(value, int) or value < 1 or value & (value - 1):
            why.append(f"{sym} = {value} is not a power of two")
            continue
        values = []
        for v in sorted({max(1, value // 4), max(1, value // 2), value, value * 2, value * 4}):
            if v == value or _fits(spec, launch, sym, value, v):
                values.append(v)
        if len(values) > 1:
            out[sym] = values
        else:
            why.append(f"{sym}: no other value keeps a legal launch covering the same work")
    return out, why


def _with(spec, sizes: dict):
    return dataclasses.replace(spec, sizes={**spec.sizes, **sizes})


def _total(spec, launch) -> tuple[int | None, int | None]:
    g = b = 1
    for e in launch["grid"]:
        v = spec.size(str(e))
        if v is None:
            return None, None
        g *= v
    for e in launch["block"]:
        v = spec.size(str(e))
        if v is None:
            return None, None
        b *= v
    return g, b


def _fits(spec, launch, sym: str, old: int, new: int, others: dict | None = None) -> bool:
    """The launch with `sym` = `new` (and `others`) is legal (1 to 1024 threads per block, whole warps where the
    application's block was, at least one block) and covers what the application's covered: as many threads, or,
    where the block does not spell `sym` (elements per thread), as many threads times `sym`."""
    g0, b0 = _total(spec, launch)
    g1, b1 = _total(_with(spec, {sym: new, **(others or {})}), launch)
    if None in (g0, b0, g1, b1) or g1 < 1 or not 1 <= b1 <= MAX_THREADS:
        return False
    if b0 % 32 == 0 and b1 % 32:
        return False
    in_block = any(spells(b, sym) for b in launch["block"])
    need = g0 * b0 if in_block else g0 * b0 * old
    have = g1 * b1 if in_block else g1 * b1 * new
    return have >= need


class TuneParams(Transformation):
    def __init__(self):
        super().__init__("tune_params", "the kernel's parameters searched together: block, its own tunable "
                                        "sizes, launch bounds, a register cap", {})

    def _axes(self, src, spec, launch) -> tuple[dict, dict]:
        """The space and the kernel's current point."""
        if redefined_sizes(src.text):
            raise Refused("tune_params already set this kernel's sizes")
        space, current, why = {}, {}, []
        try:
            blocks = LaunchConfig().space(src, spec, launch)["block"]
            now = "x".join(str(spec.size(str(b))) for b in launch["block"])
            now = int(now) if len(launch["block"]) == 1 else now
            space["block"] = blocks + ([now] if now not in blocks else [])
            current["block"] = now
        except Refused as e:
            why.append(f"block: {e}")
        sizes, no = tunable_sizes(src, spec, launch)
        why += no
        for sym, values in sizes.items():
            space[f"size:{sym}"] = values
            current[f"size:{sym}"] = spec.sizes[sym]
        capped = "__maxnreg__" in src.head          # a register cap in the text already (nvcc: no bounds beside it)
        if not src.has_launch_bounds() and not capped and block_threads(spec, launch) is not None and \
                varying_block(spec) is None:
            space["bounds"] = BOUNDS
            current["bounds"] = 0
        if not capped and not any(f.startswith("-maxrregcount") or "maxrregcount" in f for f in spec.build.nvcc_flags):
            space["regs"] = REGS
            current["regs"] = 0
        if not space:
            raise Refused("no parameter to tune (" + "; ".join(why or ["no block or tunable size"]) + ")")
        return space, current

    def space(self, src, spec, launch):
        return self._axes(src, spec, launch)[0]

    def first_point(self, src, spec, launch):
        """One step from the kernel as it is: the next larger block (or tunable size), else the first other value."""
        space, current = self._axes(src, spec, launch)
        for name in [k for k in space if k == "block" or k.startswith("size:")]:
            values = space[name]
            if name == "block" and len(values) > 1:
                order = sorted(values, key=_threads) if not isinstance(current[name], int) else sorted(values)
                i = order.index(current[name])
                step = order[i + 1] if i + 1 < len(order) else order[i - 1]
                return {**current, name: step}
            if name.startswith("size:"):
                i = values.index(current[name])
                return {**current, name: values[i + 1] if i + 1 < len(values) else values[i - 1]}
        if "regs" in space:            # no block to move: a register cap first (64, the middle of the axis)
            return {**current, "regs": 64}
        return {**current, "bounds": space["bounds"][1]} if "bounds" in space else current

    def apply(self, src, spec, launch, params):
        space, current = self._axes(src, spec, launch)
        point = {**current, **{k: v for k, v in params.items() if k in space}}
        if point == current:
            raise Refused("the kernel's own configuration (nothing to change)")
        for k, v in point.items():
            if v not in space[k] and str(v) not in map(str, space[k]):
                raise Refused(f"{k} = {v} is not in the space ({space[k]})")
        sizes = {k[5:]: int(v) for k, v in point.items() if k.startswith("size:") and int(v) != current[k]}
        new_launch, changes = None, []
        if point.get("block", current.get("block")) != current.get("block"):
            rw = LaunchConfig().apply(src, spec, launch, {"block": point["block"]})
            new_launch = rw.launch
            changes.append(f"{point['block']} threads per block (was {'x'.join(launch['block'])})")
        base = new_launch or launch
        if sizes:
            if not all(_fits(spec, launch, s, spec.sizes[s], v, {o: w for o, w in sizes.items() if o != s})
                       for s, v in sizes.items()):
                raise Refused(f"sizes {sizes} leave part of the work without a thread or an illegal block")
            sub = lambda e: _substituted(str(e), sizes)
            new_launch = {"grid": [sub(e) for e in base["grid"]], "block": [sub(e) for e in base["block"]],
                          "shared_mem": sub(base.get("shared_mem", "0"))}
            changes += [f"{s} = {v} in the kernel and its launch (the application's: {spec.sizes[s]})"
                        for s, v in sizes.items()]
        edits = []
        threads = bound_threads(_with(spec, sizes), new_launch or launch)
        bounds = int(point.get("bounds", 0) or 0)
        if bounds:
            edit = src.attribute_edit(f"__launch_bounds__({threads}, {bounds})")
            if edit is None or threads is None:
                raise Refused("neither __global__ nor the kernel's name is spelled in its declaration (macros)"
                              if edit is None else "the block size is not a compile-time value")
            edits.append(edit)
            changes.append(f"__launch_bounds__({threads}, {bounds})")
        if sizes:
            start, end = src.fn.extent.start.offset, src.span(src.body)[1]
            for s_, v in sizes.items():
                for m in re.finditer(_token(s_), src.text[start:end]):
                    edits.append((start + m.start(), start + m.end(), f"({v})"))
            a = src.span(src.body)[0] + 1
            edits.append((a, a, f"\n    {MARK} {', '.join(f'{s_} = {v}' for s_, v in sizes.items())} (the "
                                f"application's: {', '.join(f'{s_} = {spec.sizes[s_]}' for s_ in sizes)})"))
        regs = int(point.get("regs", 0) or 0)
        flags = []
        if regs:
            edit = src.attribute_edit(f"__maxnreg__({regs})")
            if bounds or src.has_launch_bounds() or edit is None:
                # nvcc refuses __maxnreg__ beside __launch_bounds__: the cap is the file's build flag then
                flags = [f"-maxrregcount={regs}"]
                changes.append(f"at most {regs} registers per thread (-maxrregcount)")
            else:
                # in the kernel's own text: a build flag would not reach the application (on the GPU a 1.22x
                # register cap was kept as a patch and left the application's kernel as it was)
                edits.append(edit)
                changes.append(f"at most {regs} registers per thread (__maxnreg__)")
        text = src.replace(edits) if edits else src.text
        return Rewrite(text, "tuned parameters: " + "; ".join(changes), new_launch, flags)


def _substituted(expr: str, sizes: dict[str, int]) -> str:
    for s, v in sizes.items():
        expr = re.sub(_token(s), f"({v})", expr)
    return expr
