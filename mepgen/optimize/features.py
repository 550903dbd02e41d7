"""The features of a kernel that decide which optimizations carry over to it from another kernel.

Read from the MEP's spec (dtype, arithmetic intensity from `work.bytes`/`work.flops`), the extraction's
inventory when it is there (loop depth, atomics, shared memory) and the kernel's source (how threads
index memory). `similarity()` compares two feature sets in [0, 1]; the patterns store ranks inherited
wins with it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..spec import Spec

ACCESS = ("coalesced", "strided", "gather", "atomic")

_ASSIGN = re.compile(r"\b(?:const\s+)?(?:unsigned\s+)?(?:int|long|size_t|auto|long long)\s+(\w+)\s*=\s*([^;]+);")
_SUBSCRIPT = re.compile(r"\b\w+\s*\[([^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*)\]")
_LOOP = re.compile(r"\b(for|while)\s*\(")


def kernel_body(text: str, name: str) -> str:
    """The source of `__global__ ... name(...) {...}` in a kernel.cu, or the whole text when not found."""
    short = name.split("::")[-1]
    m = re.search(rf"__global__[^;{{]*\b{re.escape(short)}\s*\(", text)
    if not m:
        return text
    start = text.find("{", m.end())
    if start < 0:
        return text
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[m.start():i + 1]
    return text[m.start():]


def thread_vars(body: str) -> set[str]:
    """Variables that follow threadIdx.x (directly or through other such variables)."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for var, expr in _ASSIGN.findall(body):
            if var in found:
                continue
            if "threadIdx.x" in expr or any(re.search(rf"\b{v}\b", expr) for v in found):
                found.add(var)
                changed = True
    return found


def access_pattern(body: str) -> str:
    """atomic > gather (an index read from memory) > strided (a thread index times a stride) > coalesced."""
    if re.search(r"\batomic\w*\s*\(", body):
        return "atomic"
    subs = _SUBSCRIPT.findall(body)
    if any("[" in s for s in subs):
        return "gather"
    tvars = thread_vars(body) | {"threadIdx.x"}
    for s in subs:
        for v in tvars:
            if re.search(rf"(?<![\w.]){re.escape(v)}(?![\w])\s*\*|\*\s*{re.escape(v)}(?![\w])", s):
                return "strided"
    return "coalesced"


def loop_depth(body: str) -> int:
    """Deepest nesting of for/while loops, following braces (a loop without braces nests one statement)."""
    depth, best, stack = 0, 0, []
    i = 0
    while i < len(body):
        m = _LOOP.match(body, i) if body[i] in "fw" and (i == 0 or not (body[i - 1].isalnum() or body[i - 1] == "_")) else None
        if m:
            depth += 1
            best = max(best, depth)
            j, par = m.end(), 1
            while j < len(body) and par:
                par += {"(": 1, ")": -1}.get(body[j], 0)
                j += 1
            while j < len(body) and body[j].isspace():
                j += 1
            if j < len(body) and body[j] == "{":
                stack.append(True)
                i = j + 1
            else:
                stack.append(False)          # braceless: ends at the next ';' at this level
                end = body.find(";", j)
                inner = body[j:end + 1] if end >= 0 else body[j:]
                best = max(best, depth + loop_depth(inner))
                stack.pop()
                depth -= 1
                i = j + len(inner)
            continue
        c = body[i]
        if c == "{":
            stack.append(False)
        elif c == "}" and stack:
            if stack.pop():
                depth -= 1
        i += 1
    return best


def intensity_class(spec: Spec) -> str:
    """memory (< 1 flop per byte, or no flops stated), balanced (1-10), compute (> 10), unknown."""
    nbytes = spec.size(spec.work.bytes) if spec.work.bytes else None
    flops = spec.size(spec.work.flops) if spec.work.flops else None
    if not nbytes:
        return "compute" if flops else "unknown"
    ai = (flops or 0) / nbytes
    return "memory" if ai < 1 else ("balanced" if ai <= 10 else "compute")


def main_dtype(spec: Spec) -> str:
    """The element type of the largest buffer (floating point on a tie)."""
    buffers = [(spec.size(p.count) or 0, p.dtype.startswith("float"), p.dtype)
               for p in spec.params if p.is_buffer and p.dtype]
    return max(buffers)[2] if buffers else "unknown"


def inventory_entry(mep_dir: Path, kernel_id: str) -> dict | None:
    inv = Path(mep_dir).resolve().parent.parent / "inventory.json"
    if not inv.is_file():
        return None
    try:
        kernels = json.loads(inv.read_text()).get("kernels", [])
    except (json.JSONDecodeError, OSError):
        return None
    return next((k for k in kernels if k.get("id") == kernel_id), None)


def kernel_features(spec: Spec, kernel_text: str, gpu_name: str, mep_dir: Path | None = None) -> dict:
    body = kernel_body(kernel_text, spec.kernel.name)
    entry = inventory_entry(mep_dir, spec.kernel.id) if mep_dir is not None else None
    tags = set(entry.get("features", [])) if entry else set()
    if "__shared__" in body:
        tags.add("shared_memory")
    if "__syncthreads" in body:
        tags.add("block_sync")
    depth = loop_depth(body)
    if entry and isinstance(entry.get("loop_depth"), int):
        depth = max(depth, entry["loop_depth"])
    return {"access": access_pattern(body), "loop_depth": depth, "intensity": intensity_class(spec),
            "dtype": main_dtype(spec), "gpu": gpu_name, "tags": sorted(tags),
            "dims": len(spec.launch.block)}


_WEIGHTS = {"access": 0.35, "intensity": 0.2, "dtype": 0.1, "loop_depth": 0.15, "gpu": 0.1, "tags": 0.05,
            "dims": 0.05}


def similarity(a: dict, b: dict) -> float:
    """1.0 for identical features; the access pattern and arithmetic intensity weigh most."""
    score = 0.0
    for key, w in _WEIGHTS.items():
        x, y = a.get(key), b.get(key)
        if key == "loop_depth":
            x, y = int(x or 0), int(y or 0)
            score += w * (1.0 - abs(x - y) / max(x, y, 1))
        elif key == "tags":
            sx, sy = set(x or []), set(y or [])
            score += w * (len(sx & sy) / len(sx | sy) if sx | sy else 1.0)
        else:
            score += w * (1.0 if x == y and x is not None else 0.0)
    return round(score, 4)
