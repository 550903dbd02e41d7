"""One spelling of the kernel for the library's analyses, whatever spelling the application chose.

Each step is a source-to-source rewrite that changes no result, applied to the kernel's body only (never to its
signature, macros or types, so a rewrite still reads as the application's code and compiles where it does):
- a loop counter declared before its loops (C89, `int k; ... for (k = 0; ...)`) is declared by each loop that
  sets it, when nothing outside those loops reads it;
- a local declared without a value and set once by a later statement of the same block from parameters and
  literals only (C89 `float c1, c2; c1 = 0.2; c2 = 0.5;`) is declared with that value;
- a local declared without a value at the top, all of whose uses lie in one nested block that first sets it
  (`float acc; if (j < n) { acc = 0; ... }`), is declared where it is first set (`int lo, hi;` split first), and a
  declaration that a loop right after it does not use moves past the loop when nothing the loop does can change
  its value (normalize_sink.py);
- an early return at the top of the work (`if (i >= n) return; rest`) becomes the guard around the rest
  (`if (i < n) { rest }`), the condition negated term by term;
- a thread-index declaration at the start of a guarded block (`if (i < n) { int j = ...threadIdx.y; ... }`)
  moves before the guard (it reads only the block geometry);
- nested guards without else (`if (a) { if (b) {...} }`) become one (`if (a && b) {...}`);
- the block size spelled as the macro or literal the launch's block is (`blockIdx.x * TILE_X + threadIdx.x` with
  `dim3 block(TILE_X, TILE_Y)`, or a macro for the same fixed integer as a literal block) is read as `blockDim.x`:
  the same value at that launch;
- the global index spelled through locals (`int bx = blockIdx.x; ... bx * BLOCK + tx`) or `__umul24` is written
  `blockIdx.x * blockDim.x + threadIdx.x` where each part is provably that (thread_index.py), and its declaration
  moves to the top of the body over statements without loops (it reads only the block geometry);
- a guard of the kernel's top level whose body is one statement without braces (`if (x < n) y[x] = ...;`) gets
  braces, so a rewrite that copies the guarded work copies whole statements;
- a local pointer into a parameter's buffer (`const float* row = A + i * n; ... row[j]`) that is only indexed is
  read through the parameter itself (`A[(i * n) + (j)]`), so the access model sees which buffer and where.
The steps repeat until none applies. Every transformation then matches one shape instead of each spelling.
"""
from __future__ import annotations

import re

from .analysis import body_statements
from .cursors import _past_semicolon, _unwrap, _whole_lines, kind, walk
from .normalize_sink import deferred_declarations, split_declarations, sunk_declarations
from .thread_index import block_size_reason, index_first, spelled_indices

_FLIP = {"<": ">=", ">=": "<", ">": "<=", "<=": ">", "==": "!=", "!=": "=="}
_GEOMETRY = {"threadIdx", "blockIdx", "blockDim", "gridDim"}
ROUNDS = 8


def normalized(src) -> str:
    """The text of `src` (a KernelSource) after one applicable normalization step; `src.text` when none applies."""
    # the thread index first: a kernel with many C89 declarations spends the ROUNDS on the others
    for step in (spelled_indices, index_first, _c89_counters, _late_initializers, split_declarations, sunk_declarations,
                 deferred_declarations, _early_return, _hoist_indices, _merge_guards, _pointer_offsets,
                 _block_size_spelled, _braced_guards):
        edits = step(src)
        if edits:
            return src.replace(edits)
    return src.text


# --- C89 loop counters -----------------------------------------------------------------------------------

def _c89_counters(src) -> list:
    loops_of: dict[int, list] = {}
    for c in walk(src.body):
        if kind(c) != "FOR_STMT":
            continue
        kids = list(c.get_children())
        init = kids[0] if kids else None
        if init is None or kind(init) != "BINARY_OPERATOR" or src.operator(init) != "=":
            continue
        lhs = list(init.get_children())[0]
        ref = lhs.referenced if kind(lhs) == "DECL_REF_EXPR" else None
        if ref is not None and kind(ref) == "VAR_DECL":
            loops_of.setdefault(ref.location.offset, []).append(c)
    if not loops_of:
        return []
    for stmt in walk(src.body):
        if kind(stmt) != "DECL_STMT":
            continue
        decls = list(stmt.get_children())
        if not decls or any(kind(d) != "VAR_DECL" for d in decls):
            continue
        movable = [d for d in decls if _movable(src, d, loops_of.get(d.location.offset, []))]
        if not movable:
            continue
        edits = []
        for d in movable:
            for loop in loops_of[d.location.offset]:
                init = list(loop.get_children())[0]
                edits.append((init.extent.start.offset, init.extent.start.offset, d.type.spelling + " "))
        keep = [d for d in decls if d not in movable]
        s, e = src.span(stmt)
        if not keep:
            while e < len(src.text) and src.text[e] in " \t":
                e += 1
            if e < len(src.text) and src.text[e] == "\n":
                e += 1
            while s > 0 and src.text[s - 1] in " \t":
                s -= 1
            edits.append((s, e, ""))
        else:
            head = src.text[decls[0].extent.start.offset:decls[0].location.offset]
            if any(ch in head for ch in "*&[("):
                continue
            parts = [src.text[d.location.offset:d.extent.end.offset] for d in keep]
            edits.append((s, e, head + ", ".join(parts) + ";"))
        return edits
    return []


def _movable(src, d, loops) -> bool:
    """Whether every use of local `d` lies in a loop that sets it first (none nested in another), so each loop
    may declare its own counter."""
    if not loops or d.type.get_canonical().kind.name not in ("INT", "UINT", "LONG", "ULONG", "LONGLONG", "ULONGLONG",
                                                             "SHORT", "USHORT"):
        return False
    if [k for k in d.get_children() if kind(k) not in ("TYPE_REF",)]:
        return False                        # an initializer someone may read: leave it
    spans = [src.span(lp) for lp in loops]
    if any(a[0] < b[0] and b[1] <= a[1] for a in spans for b in spans if a != b):
        return False
    for c in walk(src.body):
        if kind(c) == "DECL_REF_EXPR" and c.referenced is not None and \
                c.referenced.location.offset == d.location.offset and c.spelling == d.spelling:
            if not any(s <= c.extent.start.offset < e for s, e in spans):
                return False
    return True


# --- early return ---------------------------------------------------------------------------------------

def _tail_blocks(src):
    """Compound statements whose end is the kernel's end: the body, and the then-block of an `if` without else
    that is the last statement of a tail block."""
    block = src.body
    while block is not None:
        yield block
        stmts = list(block.get_children())
        last = stmts[-1] if stmts else None
        if last is None or kind(last) != "IF_STMT" or len(list(last.get_children())) != 2:
            return
        then = list(last.get_children())[1]
        block = then if kind(then) == "COMPOUND_STMT" else None


def _is_return(c) -> bool:
    if kind(c) == "RETURN_STMT":
        return not list(c.get_children())
    if kind(c) == "COMPOUND_STMT":
        kids = list(c.get_children())
        return len(kids) == 1 and _is_return(kids[0])
    return False


def _early_return(src) -> list:
    for block in _tail_blocks(src):
        stmts = list(block.get_children())
        for i, s in enumerate(stmts):
            kids = list(s.get_children())
            if kind(s) != "IF_STMT" or len(kids) != 2 or not _is_return(kids[1]):
                continue
            start, end = src.span(s)
            end = _past_semicolon(src.text, end)
            close = block.extent.end.offset - 1          # the block's `}`
            if i == len(stmts) - 1:
                return [(start, end, "")]                # a return with nothing after it
            rest = src.text[end:close].rstrip()
            indent = _indent(src.text, start)
            closing = _indent(src.text, close)
            return [(start, close, f"if ({negated(src, kids[0])}) {{{_reindent(rest)}\n{indent}}}\n{closing}")]
    return []


def _indent(text: str, pos: int) -> str:
    line = text[text.rfind("\n", 0, pos) + 1:pos]
    return line if not line.strip() else ""


def _reindent(rest: str) -> str:
    return re.sub(r"\n[ \t]+(?=\n)", "\n", rest.replace("\n", "\n    "))


def negated(src, cond) -> str:
    """C text of `!(cond)`, pushed through `||` and comparisons: `i >= n || j >= m` -> `i < n && j < m`."""
    c = _unwrap(cond)
    kids = list(c.get_children())
    if kind(c) == "BINARY_OPERATOR" and len(kids) == 2:
        op = src.operator(c)
        if op == "||":
            return " && ".join(_paren(src, negated(src, k)) for k in kids)
        if op in _FLIP and src.text.find("?", *src.span(c)) < 0:
            return f"{src.src(kids[0]).strip()} {_FLIP[op]} {src.src(kids[1]).strip()}"
    if kind(c) == "UNARY_OPERATOR" and src.src(c).lstrip().startswith("!") and kids:
        return src.src(kids[0]).strip()
    return f"!({src.src(cond).strip()})"


def _paren(src, t: str) -> str:
    return f"({t})" if "||" in t or "?" in t else t


# --- thread indices declared inside a guard -------------------------------------------------------------------

def _hoist_indices(src) -> list:
    for block in _tail_blocks(src):
        stmts = list(block.get_children())
        if not stmts or kind(stmts[-1]) != "IF_STMT" or len(list(stmts[-1].get_children())) != 2:
            continue
        guard = stmts[-1]
        then = list(guard.get_children())[1]
        if kind(then) != "COMPOUND_STMT":
            continue
        inner = list(then.get_children())
        moved = []
        for s in inner:
            if not _index_decl(src, s) or _declared(src, list(s.get_children())[0].spelling) > 1:
                break           # (a name declared twice in the kernel would clash once hoisted)
            moved.append(s)
        if moved and len(moved) < len(inner):
            gs = guard.extent.start.offset
            text = "".join(src.text[src.span(s)[0]:_past_semicolon(src.text, src.span(s)[1])] + "\n" +
                           _indent(src.text, gs) for s in moved)
            edits = [(gs, gs, text)]
            edits += [(*_whole_lines(src, s), "") for s in moved]
            return edits
    return []


def _index_decl(src, s) -> bool:
    """`[const] int j = <only block geometry, literals and parameters>;`"""
    if kind(s) != "DECL_STMT":
        return False
    decls = list(s.get_children())
    if len(decls) != 1 or kind(decls[0]) != "VAR_DECL":
        return False
    kids = [k for k in decls[0].get_children() if kind(k) != "TYPE_REF"]
    if not kids:
        return False
    params = {p.name for p in src.params}
    geometry = False
    for n in walk(kids[-1]):
        k = kind(n)
        if k in ("CALL_EXPR", "ARRAY_SUBSCRIPT_EXPR") or k.endswith("ASSIGNMENT_OPERATOR"):
            return False
        if k == "DECL_REF_EXPR" and n.spelling not in params and n.spelling not in _GEOMETRY:
            return False
        if k == "MEMBER_REF_EXPR" and src.src(n).split(".")[0].strip() in _GEOMETRY:
            geometry = True
    return geometry


# --- nested guards --------------------------------------------------------------------------------------

def _merge_guards(src) -> list:
    for c in walk(src.body):
        kids = list(c.get_children())
        if kind(c) != "IF_STMT" or len(kids) != 2:
            continue
        then = kids[1]
        inner = then
        if kind(then) == "COMPOUND_STMT":
            body = list(then.get_children())
            if len(body) != 1:
                continue
            inner = body[0]
        ik = list(inner.get_children())
        if kind(inner) != "IF_STMT" or len(ik) != 2:
            continue
        cond = f"{_paren(src, src.src(kids[0]).strip())} && {_paren(src, src.src(ik[0]).strip())}"
        s, e = src.span(c)
        bs, be = src.span(ik[1])
        if kind(ik[1]) != "COMPOUND_STMT":       # one statement without braces: its `;` lies past its extent
            be = _past_semicolon(src.text, be)
            e = max(e, _past_semicolon(src.text, e))
        return [(s, e, f"if ({cond}) {src.text[bs:be]}")]
    return []


# --- pointer offsets ------------------------------------------------------------------------------------

def _pointer_offsets(src) -> list:
    written = set()
    for w in src.writes():
        kids = list(w.get_children())
        t = _unwrap(kids[0]) if kids else None
        if t is not None and kind(t) == "DECL_REF_EXPR":
            written.add(t.spelling)
    subscripts = [c for c in walk(src.body) if kind(c) == "ARRAY_SUBSCRIPT_EXPR"]
    for stmt in walk(src.body):
        if kind(stmt) != "DECL_STMT":
            continue
        decls = list(stmt.get_children())
        if len(decls) != 1 or kind(decls[0]) != "VAR_DECL" or decls[0].spelling in written or \
                decls[0].type.get_canonical().kind.name != "POINTER":
            continue
        v = decls[0]
        init = [k for k in v.get_children() if kind(k) not in ("TYPE_REF",)]
        base = _offset_of(src, _unwrap(init[-1]), written) if init else None
        if base is None:
            continue
        p, offset = base
        uses = [c for c in walk(src.body) if kind(c) == "DECL_REF_EXPR" and c.spelling == v.spelling and
                c.referenced is not None and c.referenced.location.offset == v.location.offset]
        indexed = {}
        for s in subscripts:
            b, i = list(s.get_children())
            b = _unwrap(b)
            if kind(b) == "DECL_REF_EXPR" and b.spelling == v.spelling:
                indexed[src.span(b)] = (s, i)
        if not uses or any(src.span(u) not in indexed for u in uses):
            continue
        edits = []
        for u in uses:
            s, i = indexed[src.span(u)]
            edits.append((*src.span(s), f"{p}[({offset}) + ({src.src(i).strip()})]"))
        edits.append((*_whole_lines(src, stmt), ""))
        return edits
    return []


def _offset_of(src, e, written) -> tuple[str, str] | None:
    """(pointer parameter, offset text) of `P + E`, `E + P` or `&P[E]`, E reading only parameters and locals
    that are never assigned; None otherwise."""
    pointer, offset = None, None
    kids = list(e.get_children())
    if kind(e) == "BINARY_OPERATOR" and len(kids) == 2 and src.operator(e) == "+":
        for a, b in (kids, kids[::-1]):
            a = _unwrap(a)
            if kind(a) == "DECL_REF_EXPR" and src.param(a.spelling) is not None and src.param(a.spelling).pointer:
                pointer, offset = a.spelling, b
                break
    elif kind(e) == "UNARY_OPERATOR" and src.src(e).lstrip().startswith("&") and kids and \
            kind(_unwrap(kids[0])) == "ARRAY_SUBSCRIPT_EXPR":
        a, b = list(_unwrap(kids[0]).get_children())
        a = _unwrap(a)
        if kind(a) == "DECL_REF_EXPR" and src.param(a.spelling) is not None and src.param(a.spelling).pointer:
            pointer, offset = a.spelling, b
    if pointer is None or offset.type.get_canonical().kind.name == "POINTER":
        return None
    if any(_declared(src, n) > 1 for n in src.refs(offset)):
        return None             # a name shadowed somewhere could mean something else where the pointer is used
    for n in walk(offset):
        k = kind(n)
        if k in ("CALL_EXPR", "ARRAY_SUBSCRIPT_EXPR") or k.endswith("ASSIGNMENT_OPERATOR") or \
                k == "DECL_REF_EXPR" and n.spelling in written:
            return None
    return pointer, src.src(offset).strip()


# --- late initializers ----------------------------------------------------------------------------------

def _late_initializers(src) -> list:
    params = {p.name for p in src.params}
    assigned: dict[str, int] = {}
    for w in src.writes():
        kids = list(w.get_children())
        t = _unwrap(kids[0]) if kids else None
        if t is not None and kind(t) == "DECL_REF_EXPR":
            assigned[t.spelling] = assigned.get(t.spelling, 0) + 1
    for block in (c for c in walk(src.body) if kind(c) == "COMPOUND_STMT"):
        stmts = list(block.get_children())
        for n, stmt in enumerate(stmts):
            if kind(stmt) != "DECL_STMT":
                continue
            decls = list(stmt.get_children())
            if not decls or any(kind(d) != "VAR_DECL" or [k for k in d.get_children() if kind(k) != "TYPE_REF"]
                                for d in decls):
                continue
            head = src.text[decls[0].extent.start.offset:decls[0].location.offset]
            if any(ch in head for ch in "*&[(") or "__shared__" in head or "static" in head:
                continue
            values, removed = {}, []
            for later in stmts[n + 1:]:
                kids = list(later.get_children())
                if kind(later) == "BINARY_OPERATOR" and src.operator(later) == "=" and \
                        kind(_unwrap(kids[0])) == "DECL_REF_EXPR":
                    name = _unwrap(kids[0]).spelling
                    if name in {d.spelling for d in decls} and name not in values and assigned.get(name) == 1 and \
                            src.refs(kids[1]) <= params and not any(kind(x) in ("CALL_EXPR", "ARRAY_SUBSCRIPT_EXPR")
                                                                    for x in walk(kids[1])):
                        values[name] = src.src(kids[1]).strip()
                        removed.append(later)
                        continue
                break           # only the statements right after the declaration, before any other use
            if not values:
                continue
            decl_text = " ".join(f"{head.strip()} {src.text[d.location.offset:d.extent.end.offset]}"
                                 f"{' = ' + values[d.spelling] if d.spelling in values else ''};" for d in decls)
            edits = [(*src.span(stmt), decl_text.rstrip(";") if src.text[src.span(stmt)[1] - 1] != ";" else decl_text)]
            spans = []
            for r in removed:
                a, b = src.span(r)
                while a > 0 and src.text[a - 1] in " \t":
                    a -= 1
                b = _past_semicolon(src.text, b)
                if spans and spans[-1][1] == a:
                    a = spans.pop()[0]
                spans.append((a, b))
            for a, b in spans:          # a line left empty goes with them
                if (a == 0 or src.text[a - 1] == "\n") and src.text[b:b + 1] == "\n":
                    b += 1
                edits.append((a, b, ""))
            return edits
    return []


def _declared(src, name: str) -> int:
    """How many variables of the kernel (parameters included) are called `name`."""
    return sum(1 for c in walk(src.fn) if kind(c) in ("VAR_DECL", "PARM_DECL") and c.spelling == name)


# --- the block size spelled as the launch's macro ----------------------------------------------------------

_BLOCK_TIMES = re.compile(r"\bblockIdx\s*\.\s*([xyz])\s*\*\s*([A-Za-z_]\w*|\d+)\b(?!\s*[.(\[])")
_TIMES_BLOCK = re.compile(r"(?<![\w.])([A-Za-z_]\w*|\d+)\s*\*\s*blockIdx\s*\.\s*([xyz])\b")


def _block_size_spelled(src) -> list:
    """`blockIdx.x * TX` (or `TX * blockIdx.x`) where the launch's block x is spelled `TX`: TX becomes
    `blockDim.x` (the same value at this launch, both unsigned products), so a global index is recognised in
    any spelling and a new block shape stays consistent with the kernel."""
    start, end = src.span(src.body)
    body = src.text[start:end]
    edits = []
    for pattern, axis_group, token_group in ((_BLOCK_TIMES, 1, 2), (_TIMES_BLOCK, 2, 1)):
        for m in pattern.finditer(body):
            d = "xyz".index(m.group(axis_group))
            if block_size_reason(src, m.group(token_group), d) is not None:
                continue            # not provably the launch's block size (thread_index.py)
            edits.append((start + m.start(token_group), start + m.end(token_group), f"blockDim.{m.group(axis_group)}"))
    return sorted(set(edits))


# --- braces around a guard's single statement ---------------------------------------------------------------

def _braced_guards(src) -> list:
    for s in body_statements(src.body):
        kids = list(s.get_children())
        if kind(s) != "IF_STMT" or len(kids) != 2 or kind(kids[1]) == "COMPOUND_STMT":
            continue
        a, b = src.span(kids[1])
        end = _past_semicolon(src.text, b)
        close = src.text.rfind(")", src.span(kids[0])[1], a)
        if end == b or close < 0:   # a statement that ends otherwise (a loop, a nested if): left as written
            continue
        line = src.text.rfind("\n", 0, src.span(s)[0]) + 1
        indent = re.match(r"[ \t]*", src.text[line:]).group(0)
        return [(close + 1, end, f" {{\n{indent}    {src.text[a:end]}\n{indent}}}")]
    return []
