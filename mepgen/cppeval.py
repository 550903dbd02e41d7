"""Integer values of C++ expressions as the compiler computes them: float arithmetic, casts, `ceil`, `?:`,
comparisons, members of a `dim3`: C++'s own semantics, never a re-implementation of them.

A launch configuration is C++ (`(size_t)ceil(((float)NI) / ((float)32))`); mepgen needs its value to check
mep.yaml, generate inputs and size the roofline. The expressions of one request are written into a tiny host
program with the size and macro values as `#define`s, compiled with the host compiler (`$CXX`, else g++, else
c++, else clang++) and run; what it prints is the answer. Results are cached by the program's text, in memory
and under `$XDG_CACHE_HOME/mepgen/cppeval/` (default `~/.cache`), so a spec is compiled once per machine.
An expression that does not compile (an unknown name, a type the program does not know) is None.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import usercache

_PRELUDE = r"""#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <climits>
#include <type_traits>
using std::size_t;
using std::ceil; using std::floor; using std::sqrt; using std::log2; using std::pow;
// CUDA's host-side dim3 (vector_types.h): three unsigned components, missing ones are 1
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};
// CUDA's host min/max accept mixed integer types (math_functions.hpp); std's do not
template <class A, class B> constexpr auto min(A a, B b) -> decltype(a < b ? a : b) { return b < a ? b : a; }
template <class A, class B> constexpr auto max(A a, B b) -> decltype(a < b ? a : b) { return a < b ? b : a; }
"""
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_MEMORY: dict[str, list[int | None]] = {}
TIMEOUT_S = 60


def compiler() -> str | None:
    """The host C++ compiler: `$CXX`, else the first of g++, c++, clang++ on the PATH."""
    env = os.environ.get("CXX")
    if env:
        return env
    return next((c for c in ("g++", "c++", "clang++") if shutil.which(c)), None)


def _cache_dir() -> Path:
    return usercache.folder("cppeval")


def _defines(exprs: list[str], values: dict[str, object]) -> list[str]:
    """`#define NAME VALUE` for every value an expression names, and the values those name, in dependency order."""
    out: list[str] = []
    done: set[str] = set()

    def visit(name: str, depth: int = 0) -> None:
        if name in done or name not in values or depth > 50:
            return
        done.add(name)
        v = values[name]
        text = str(int(v)) if isinstance(v, bool) else str(v)
        for n in _IDENT.findall(text):
            visit(n, depth + 1)
        out.append(f"#define {name} ({text})")

    for e in exprs:
        for n in _IDENT.findall(e):
            visit(n)
    return out


def program(exprs: list[str], values: dict[str, object]) -> str:
    lines = [_PRELUDE, *_defines(exprs, values), "int main() {"]
    for e in exprs:
        lines.append(f'    std::printf("%lld\\n", (long long)({e}));')
    lines.append("    return 0;\n}")
    return "\n".join(lines) + "\n"


def _run(source: str) -> list[int] | None:
    cxx = compiler()
    if cxx is None:
        return None
    with tempfile.TemporaryDirectory(prefix="mepgen-cppeval-") as tmp:
        src, exe = Path(tmp) / "eval.cpp", Path(tmp) / "eval"
        src.write_text(source)
        try:
            built = subprocess.run([cxx, "-std=c++17", "-w", "-O0", str(src), "-o", str(exe)], capture_output=True,
                                   text=True, timeout=TIMEOUT_S)
            if built.returncode != 0:
                return None
            ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if ran.returncode != 0:
            return None
        try:
            return [int(x) for x in ran.stdout.split()]
        except ValueError:
            return None


def _cached(key: str) -> list[int | None] | None:
    if key in _MEMORY:
        return _MEMORY[key]
    path = _cache_dir() / f"{key}.json"
    try:
        got = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    _MEMORY[key] = got
    return got


def _store(key: str, result: list[int | None]) -> None:
    _MEMORY[key] = result
    try:
        d = _cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f"{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(result))
        tmp.replace(d / f"{key}.json")
    except OSError:
        pass   # a read-only home: the in-memory cache still serves this process


def evaluate_many(exprs: list[str], values: dict[str, object]) -> list[int | None]:
    """The value of each expression (None where it does not compile or does not run), in one compile when all
    of them compile, else one compile each (so one bad expression does not hide the others' values)."""
    exprs = [str(e) for e in exprs]
    if not exprs:
        return []
    key = _key(program(exprs, values))
    hit = _cached(key)
    if hit is not None and len(hit) == len(exprs):
        return hit
    if len(exprs) > 1:       # each one may be known already (the cache is also kept per expression)
        singles = [_cached(_key(program([e], values))) for e in exprs]
        if all(x is not None and len(x) == 1 for x in singles):
            return [x[0] for x in singles]
    got = _run(program(exprs, values))
    if got is not None and len(got) == len(exprs):
        result: list[int | None] = list(got)
    elif len(exprs) == 1:
        result = [None]
    else:
        result = [evaluate_many([e], values)[0] for e in exprs]
    if compiler() is not None:
        _store(key, result)
        if len(exprs) > 1:
            for e, r in zip(exprs, result):
                _store(_key(program([e], values)), [r])
    return result


def _key(source: str) -> str:
    return hashlib.sha256(((compiler() or "") + "\0" + source).encode()).hexdigest()[:32]


def evaluate(expr: str, values: dict[str, object]) -> int | None:
    return evaluate_many([expr], values)[0]


def is_integral(expr: str, values: dict[str, object]) -> bool | None:
    """Whether C++ gives `expr` an integer type (`0.5f * 4` has none); None when it does not compile."""
    got = evaluate(f"std::is_integral<std::decay_t<decltype({expr})>>::value", values)
    return None if got is None else bool(got)
