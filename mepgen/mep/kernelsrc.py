"""kernel.cu: the kernel and its dependency closure, copied byte for byte from the application.

Members come in the order the inventory gives (`order`: translation-unit position), each preceded by a
`#line` marker naming its original file so compiler errors point at the user's sources, and reopened in
its namespaces. The kernel's own text is copied unchanged: the patch stage splices a winning variant
back into the application by the kernel's byte extent. Application headers are never included wholesale
(they drag in host code); only the system headers the kernel's files include are.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..mepbuild import size_macro
from ..spec import Spec

_CATEGORIES = ("macros", "typedefs", "enums", "types", "globals", "device_functions")


def _includes(kernel: dict) -> tuple[list[str], list[str]]:
    """(system headers to include, headers left out because they were on no include path at extraction:
    the kernel parsed without them)."""
    closure = kernel["closure"]
    seen: list[str] = []
    missing: list[str] = []
    incs = list(closure.get("includes", []))
    for header in closure.get("headers", []):
        incs += closure.get("header_includes", {}).get(header, [])
    incs += closure.get("context_includes", [])      # what the files including the kernel's file included first
    for inc in incs:
        if inc.get("missing"):
            if inc["spelling"] not in missing:
                missing.append(inc["spelling"])
        elif inc.get("external") and f'"{inc["external"]}"' not in seen:   # outside the app: by its path
            seen.append(f'"{inc["external"]}"')
        elif inc.get("angled") and inc["spelling"] not in seen and not _in_app(inc.get("resolved")):
            seen.append(inc["spelling"])
    return seen, missing


def _in_app(resolved: str | None) -> bool:
    """An include resolved to the application's own file (`<common.h>` found through -Iinclude): its members are
    copied as the closure, so including it too would define them twice."""
    return bool(resolved) and not Path(resolved).is_absolute()


def _prototype(definition: str) -> str | None:
    """`__device__ int f(S a) { ... }` -> `__device__ int f(S a);` (None when the body is not found)."""
    depth, seen_paren = 0, False
    for i, c in enumerate(definition):
        if c == "(":
            depth += 1
            seen_paren = True
        elif c == ")":
            depth -= 1
        elif c == "{" and depth == 0 and seen_paren:
            return definition[:i].rstrip() + ";"
    return None


_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b", re.M)


def balance(text: str) -> tuple[int, int]:
    """(openers, closers) that make the conditionals of a copied text balanced: a definition whose extent starts
    inside an `#if` of the application (`#if A` / `__device__ void f(int) {` / `#else` / `... {` / `#endif` / body)
    holds its `#else` and `#endif` without the `#if` ("#endif without #if" in the MEP). Each opener is an `#if 1`
    before the text (the branch the text starts in was the one taken: it stays taken, an `#else` after it is not),
    each closer an `#endif` after it (an `#if` the text opens and the application closes after it)."""
    depth = openers = 0
    virtual = False          # a level whose #if lies before the text is open (an #else/#elif of it was seen)
    for m in _DIRECTIVE.finditer(text):
        d = m.group(1)
        if d in ("if", "ifdef", "ifndef"):
            depth += 1
        elif d == "endif":
            if depth:
                depth -= 1
            elif virtual:
                virtual = False
            else:
                openers += 1
        elif depth == 0 and not virtual:        # #else / #elif of a level opened before the text
            openers += 1
            virtual = True
    return openers, depth


def _balanced(marker: str, text: str) -> list[str]:
    """The #line marker and the text, between the conditionals that balance it (balance())."""
    openers, closers = balance(text)
    head = ["#if 1  // the application's #if around this text lies before it"] * openers
    return [*head, marker, text, *(["#endif  // closed after this text in the application"] * closers)]


def _wrap(text: str, namespaces: list[str]) -> str:
    if not namespaces:
        return text
    opening = " ".join(f"namespace {ns} {{" if ns else "namespace {" for ns in namespaces)
    return f"{opening}\n{text}\n{'}' * len(namespaces)}  // namespace {'::'.join(namespaces)}"


def render_kernel_file(app_root: Path, kernel: dict, spec: Spec, feeders: list[dict] = ()) -> str:
    """`feeders`: kernels of the MEP's chain (inventory entries): their closures join the target's (each
    member once) and their definitions come before the target's, which stays last."""
    app_root = Path(app_root)
    feeders = [f for f in feeders if f["usr"] != kernel["usr"]]
    cache: dict[str, bytes] = {}

    def source(rel: str, start: int, end: int) -> str:
        if rel not in cache:
            cache[rel] = (app_root / rel).read_bytes()
        return cache[rel][start:end].decode("utf-8", errors="replace")

    out = [
        f"// kernel.cu -- the MEP of {kernel['qualified_name']}, cut out of {kernel['file']} by mepgen.",
        "// The kernel and everything it needs to compile, copied from the application; #line markers name the",
        "// original files. This is the only file that variants change; the harness includes it.",
        "// Size symbols come from the build (-DMEPGEN_SIZE_<SYM>=<value>) and replace the application's macro of",
        "// the same name; the copies below apply when built without.",
    ]
    system, missing = _includes(kernel)
    for f in feeders:
        more, gone = _includes(f)
        system += [x for x in more if x not in system]
        missing += [x for x in gone if x not in missing and x not in system]
    out += [f"#include {inc}" if inc.startswith('"') else f"#include <{inc}>" for inc in system]
    out += [f"// left out: #include {inc} (on no include path when mepgen extracted; the kernel does not need it)"
            for inc in missing]
    members = []
    for cat in _CATEGORIES:
        for m in [x for k in [*feeders, kernel] for x in k["closure"].get(cat, [])]:
            # `order` is (file position in the translation unit, byte); the kernel's own file is 0 there but
            # its text comes after every header it includes
            order = tuple(m.get("order", [0, m["start_byte"]]))
            members.append(((m["file"] == kernel["file"], *order), cat, m))
    members.sort(key=lambda x: x[0])
    # a member inside another one's text (the struct of `typedef struct {...} Point;`) comes with it, not twice
    spans: dict[str, list[tuple[int, int]]] = {}
    for _, _, m in members:
        spans.setdefault(m["file"], []).append((m["start_byte"], m["end_byte"]))
    members = [x for x in members if not any(a <= x[2]["start_byte"] and x[2]["end_byte"] <= b and
                                             (a, b) != (x[2]["start_byte"], x[2]["end_byte"])
                                             for a, b in spans[x[2]["file"]])]
    done = set()
    # a device function called by one that comes before its definition (declared in a header the closure does not
    # copy, defined further down): its declaration goes before that first caller
    functions = [m for _, cat, m in members if cat == "device_functions"]
    declared: set[tuple] = set()
    for i, (_, cat, m) in enumerate(members):
        key = (m["file"], m["start_byte"])
        if key in done:
            continue
        done.add(key)
        path = (app_root / m["file"]).resolve()
        text = source(m["file"], m["start_byte"], m["end_byte"])
        line = m.get("start_line", m.get("line", 1))
        if cat == "device_functions":
            later = {(f["file"], f["start_byte"]) for _, c, f in members[i + 1:] if c == "device_functions"}
            for f in functions:
                fkey = (f["file"], f["start_byte"])
                if fkey in later and fkey not in declared and f.get("name") and \
                        re.search(rf"\b{re.escape(f['name'])}\s*\(", text):
                    proto = _prototype(source(f["file"], f["start_byte"], f["end_byte"]))
                    if proto:
                        declared.add(fkey)
                        out += ["", "// declared before its first caller, as the application's header does",
                                _wrap(proto, f.get("namespaces", []))]
        if cat == "macros":
            name = m["name"]
            if text.startswith(name + "("):       # function-like: no size can stand for it
                out += ["", f"#ifndef {name}", f'#line {line} "{path}"', f"#define {text}", "#endif"]
            else:                                 # a size of the same name (mep.yaml `sizes`) overrides it
                out += ["", f"#if defined({size_macro(name)})", f"#define {name} {size_macro(name)}",
                        f"#elif !defined({name})", f'#line {line} "{path}"', f"#define {text}", "#endif"]
            continue
        # a declaration's extent stops before its `;`: a variable with a brace initializer (`= {1.0, ...}`) ends
        # with `}` and needs it as much as a struct does
        if not text.rstrip().endswith((";", "}")) or cat in ("types", "enums", "globals") and \
                not text.rstrip().endswith(";"):
            text += ";"
        out += ["", *_balanced(f'#line {line} "{path}"', _wrap(text, m.get("namespaces", [])))]
    done_kernels = set()
    for f in sorted(feeders, key=lambda f: (f["file"] == kernel["file"], f["start_byte"])):
        if (f["file"], f["start_byte"]) in done_kernels:
            continue
        done_kernels.add((f["file"], f["start_byte"]))
        out += ["", f"// the chain: {f['qualified_name']} runs before the target (mep.yaml `chain`)",
                *_balanced(f'#line {f["start_line"]} "{(app_root / f["file"]).resolve()}"',
                           _wrap(source(f["file"], f["start_byte"], f["end_byte"]),
                                 f["qualified_name"].split("::")[:-1]))]
    kernel_text = source(kernel["file"], kernel["start_byte"], kernel["end_byte"])
    namespaces = kernel["qualified_name"].split("::")[:-1]
    out += ["", *_balanced(f'#line {kernel["start_line"]} "{(app_root / kernel["file"]).resolve()}"',
                           _wrap(kernel_text, namespaces)), ""]
    return "\n".join(out)
