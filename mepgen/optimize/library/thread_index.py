"""The global thread index along x in the spellings applications use, read as the one the library matches.

`blockIdx.x * blockDim.x + threadIdx.x` is the library's spelling of the index. Applications also write:
- the block or thread index copied to a local first (`int bx = blockIdx.x; ... bx * blockDim.x + tx`): the same
  value where the local is a 32-bit integer (`int`, `unsigned`), set only by its declaration and never written,
  nor passed by reference or address;
- the block size as a macro, literal or template parameter (`blockIdx.x * BLOCK_SIZE + threadIdx.x`): the same value
  where mep.yaml's launch spells its block along x with that very token (or one the token expands to), or where
  both are fixed integers (a literal, a macro for one, or a non-type template parameter the launch gives a literal
  argument; never a size of the MEP that tuning may change) that are equal;
- the product as `__umul24(blockIdx.x, blockDim.x)` (or `__mul24`): the same value while the block index fits in
  23 bits, which the MEP's grid along x shows (a larger grid would drop the product's high bits in the original).
An index whose parts are not provably these (a local that is assigned, a block size that is not the launch's)
is left as written, and `why_not` says which part and why, for the refusal a transformation reports.
The normalization step `spelled_indices` (normalize.py runs it) rewrites each accepted declaration's value as
`blockIdx.x * blockDim.x + threadIdx.x` and drops the locals that no code reads any more.
"""
from __future__ import annotations

import re

from ...cexpr import evaluate
from .cursors import _unwrap, _whole_lines, kind, walk
from .launch_facts import dim3_components

CANONICAL = "blockIdx.x * blockDim.x + threadIdx.x"
_GLOBAL_INDEX = re.compile(r"^\(?\s*(?:blockIdx\.x\s*\*\s*blockDim\.x|blockDim\.x\s*\*\s*blockIdx\.x)\s*\+\s*"
                           r"threadIdx\.x\s*\)?$|^\(?\s*threadIdx\.x\s*\+\s*(?:blockIdx\.x\s*\*\s*blockDim\.x|"
                           r"blockDim\.x\s*\*\s*blockIdx\.x)\s*\)?$")
_ROLES = {"blockIdx.x": "block", "threadIdx.x": "thread", "blockDim.x": "dim"}
_MUL24 = ("__umul24", "__mul24")
_INT32 = ("INT", "UINT")


def _squash(s: str) -> str:
    return "".join(s.split())


def is_global_index(text: str) -> bool:
    """`blockIdx.x * blockDim.x + threadIdx.x` in any of its commuted spellings."""
    return bool(_GLOBAL_INDEX.match(" ".join(text.split())))


def _peel(c):
    """Through parentheses, implicit conversions and explicit casts to a 32-bit integer type."""
    while c is not None:
        c = _unwrap(c)
        kids = list(c.get_children())
        if kind(c) == "CSTYLE_CAST_EXPR" and kids and c.type.get_canonical().kind.name in _INT32:
            c = kids[-1]
            continue
        return c
    return c


def _parts(src, expr):
    """(block, dim, thread, product) cursors of `B * D + T`, `T + B * D` (either factor order) or
    `__umul24(B, D) + T`; None for any other shape."""
    e = _peel(expr)
    kids = list(e.get_children())
    if kind(e) != "BINARY_OPERATOR" or len(kids) != 2 or src.operator(e) != "+":
        return None
    for prod, thread in (kids, kids[::-1]):
        p = _peel(prod)
        pk = list(p.get_children())
        if kind(p) == "BINARY_OPERATOR" and len(pk) == 2 and src.operator(p) == "*":
            factors = pk
        elif kind(p) == "CALL_EXPR" and p.spelling in _MUL24 and len(pk) == 3:
            factors = pk[1:]
        else:
            continue
        a, b = (_peel(f) for f in factors)
        for blk, dim in ((a, b), (b, a)):
            if _role(src, blk)[0] == "block":
                return blk, dim, _peel(thread), p
    return None


def _local(src, c):
    """The VAR_DECL of the kernel's local that `c` names, or None."""
    ref = c.referenced if kind(c) == "DECL_REF_EXPR" else None
    if ref is None or kind(ref) != "VAR_DECL" or ref.location.file is None or ref.location.file.name != src.path:
        return None
    start, end = src.span(src.body)
    return ref if start <= ref.location.offset < end else None


def _role(src, c) -> tuple[str | None, str | None]:
    """(role, None) where `c` is that builtin ("block", "thread", "dim") or an unchanged local holding it;
    (role, why) where it is a local that holds one but may change; (None, None) otherwise."""
    text = _squash(src.src(c))
    if text in _ROLES:
        return _ROLES[text], None
    d = _local(src, c)
    if d is None:
        return None, None
    init = [k for k in d.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
    held = _ROLES.get(_squash(src.src(_peel(init[-1])))) if init else None
    if held is None:
        return None, None
    builtin = next(k for k, v in _ROLES.items() if v == held)
    if d.type.get_canonical().kind.name not in _INT32:
        return held, f"`{d.spelling}`, which holds {builtin}, is a `{d.type.spelling}`, not a 32-bit int"
    if sum(1 for n in walk(src.fn) if kind(n) in ("VAR_DECL", "PARM_DECL") and n.spelling == d.spelling) > 1:
        return held, f"`{d.spelling}`, which holds {builtin}, is declared more than once in the kernel"
    for w in src.writes():
        kids = list(w.get_children())
        target = _unwrap(kids[0]) if kids else None
        if target is not None and kind(target) == "DECL_REF_EXPR" and target.referenced is not None and \
                target.referenced.location.offset == d.location.offset:
            return held, f"`{d.spelling}`, which holds {builtin}, is assigned in the kernel"
    for n in walk(src.body):
        if kind(n) == "CALL_EXPR" or (kind(n) == "UNARY_OPERATOR" and src.src(n).lstrip().startswith("&")):
            args = list(n.get_children())[1:] if kind(n) == "CALL_EXPR" else list(n.get_children())
            if any(kind(_unwrap_paren(a)) == "DECL_REF_EXPR" and _unwrap_paren(a).referenced is not None and
                   _unwrap_paren(a).referenced.location.offset == d.location.offset for a in args):
                return held, f"`{d.spelling}`, which holds {builtin}, is passed by reference or address"
    return held, None


def _unwrap_paren(c):
    while kind(c) == "PAREN_EXPR" and len(list(c.get_children())) == 1:
        c = list(c.get_children())[0]
    return c


def _fixed(src, token: str) -> int | None:
    """The value of a decimal literal, of a macro for one that is no size of the MEP, or of a non-type template
    parameter of the kernel that mep.yaml's launch gives a decimal argument (`template <int BS>` launched as
    `k<128>`: the block size as a template, CUB and SDK style); None otherwise."""
    t = token.strip()
    if re.fullmatch(r"[1-9]\d*", t):
        return int(t)
    if not re.fullmatch(r"[A-Za-z_]\w*", t) or t in src.spec.sizes:
        return None
    argument = src.template_values().get(t, "").strip()
    if re.fullmatch(r"[1-9]\d*[uU]?", argument):
        return int(argument.rstrip("uU"))
    body = src.expand(t).strip()
    while body.startswith("(") and body.endswith(")"):
        body = body[1:-1].strip()
    return int(body) if re.fullmatch(r"[1-9]\d*", body) else None


def block_size_reason(src, token: str, axis: int = 0) -> str | None:
    """None where `token` (a block size the kernel writes) is provably the launch's block size along `axis` (0: x)
    at mep.yaml's launch; otherwise why not."""
    block = [" ".join(str(b).split()).strip("() ") for b in dim3_components(src.spec.launch.block)]
    tok, x = token.strip(), "xyz"[axis]
    if axis >= len(block):
        return f"mep.yaml's launch has no block size along {x}"
    bx = block[axis]
    if tok == bx and (tok.isdigit() and not tok.startswith("0") or tok in src.spec.sizes or
                      _fixed(src, tok) is not None):
        return None             # the launch's own token (a macro for a typed or computed value may differ)
    if bx in src.spec.sizes and src.expand(tok).strip("() ") == bx:
        return None             # a macro for the launch's size symbol (`#define BS BLOCK_SIZE`)
    tv, bv = _fixed(src, tok), _fixed(src, bx)
    if bv is None:
        bv_any = src.spec.size(bx)
        why = "a size of the MEP, which tuning may change" if bv_any is not None else "not a fixed integer"
        return f"the launch's block size along {x} `{bx}` is {why}, and the kernel writes `{tok}` instead"
    if tv is None:
        return f"`{tok}` is not an integer literal or a macro for one, so it is not provably the launch's " \
               f"block size along {x} (`{bx}`)"
    if tv != bv:
        return f"`{tok}` (= {tv}) is not the launch's block size along {x} (`{bx}` = {bv})"
    return None


def _grid_fits(src) -> str | None:
    """None where the MEP's grid along x keeps a 24-bit product exact; otherwise why not."""
    grid = dim3_components(src.spec.launch.grid)
    g = evaluate(str(grid[0]), src.spec.sizes) if grid else None
    if g is None:
        return "the product is `__umul24` and the grid along x has no value for the MEP's sizes"
    if g > 1 << 23:
        return f"the product is `__umul24` and the grid along x ({g} blocks) exceeds 23 bits"
    return None


def why_not(src, expr) -> tuple[bool, str | None]:
    """(shaped, reason) of an expression: shaped where it has the global index's shape (a product of the block
    index and a block size, plus the thread index); reason None where every part is provably the library's
    spelling, else which part is not and why."""
    parts = _parts(src, expr)
    if parts is None:
        return False, None
    blk, dim, thread, prod = parts
    if _role(src, thread)[0] != "thread":
        return False, None
    for c in (blk, thread, dim):
        role, why = _role(src, c)
        if why:
            return True, why
    if _role(src, dim)[0] != "dim":
        tok = src.src(dim).strip()
        if not re.fullmatch(r"[A-Za-z_]\w*|\d+", tok):
            return True, f"the block size `{_squash(tok)[:40]}` is neither blockDim.x nor a macro or literal"
        reason = block_size_reason(src, tok)
        if reason:
            return True, reason
    if kind(prod) == "CALL_EXPR":
        reason = _grid_fits(src)
        if reason:
            return True, reason
    return True, None


def spelled_indices(src) -> list:
    """Normalization step: each declaration `T v = <a spelling of the global index>;` of the kernel written as
    `T v = blockIdx.x * blockDim.x + threadIdx.x;`, and the locals it read (`int bx = blockIdx.x;`) removed where
    nothing else reads them; [] when no declaration needs it."""
    edits, locals_read, replaced = [], {}, []
    # declarations that are statements of a block: a loop's start (`for (int i = blockIdx.x * blockDim.x + tid; ...`)
    # stays as written, for grid_stride's own reading of the loops
    statements = (s for b in walk(src.body) if kind(b) == "COMPOUND_STMT" for s in b.get_children()
                  if kind(s) == "DECL_STMT")
    for d in (c for s in statements for c in s.get_children() if kind(c) == "VAR_DECL"):
        init = [k for k in d.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
        if not init or is_global_index(src.src(init[-1])) or \
                d.type.get_canonical().kind.name not in ("INT", "UINT", "LONG", "ULONG", "LONGLONG", "ULONGLONG"):
            continue
        shaped, reason = why_not(src, init[-1])
        if not shaped or reason is not None:
            continue
        span = src.span(init[-1])
        edits.append((*span, CANONICAL))
        replaced.append(span)
        for n in walk(init[-1]):
            local = _local(src, n)
            if local is not None:
                locals_read[local.location.offset] = local
    for offset, local in locals_read.items():
        uses = [n for n in walk(src.body) if kind(n) == "DECL_REF_EXPR" and n.referenced is not None and
                n.referenced.location.offset == offset and
                not any(a <= n.extent.start.offset < b for a, b in replaced)]
        stmt = next((s for s in walk(src.body) if kind(s) == "DECL_STMT" and
                     [k.location.offset for k in s.get_children()] == [offset]), None)
        if not uses and stmt is not None:
            edits.append((*_whole_lines(src, stmt), ""))
    return sorted(edits)


def index_first(src) -> list:
    """Normalization step: the top-level declaration `T v = blockIdx.x * blockDim.x + threadIdx.x;` moved to the top
    of the body when only declarations of locals without a value come before it (`unsigned int hash;
    const unsigned int index = ...;`): its value reads only the block geometry, the same wherever it is computed,
    and the 1D rewrites find the index first, as they expect it. A local declared with a value before the index
    (`float acc = 1.0f;`) is state vector_elements keeps per lane: that order stays. [] when none moves."""
    stmts = list(src.body.get_children())
    for n, stmt in enumerate(stmts):
        decls = list(stmt.get_children()) if kind(stmt) == "DECL_STMT" else []
        if len(decls) != 1 or kind(decls[0]) != "VAR_DECL":
            continue
        init = [k for k in decls[0].get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
        if not init or not is_global_index(src.src(init[-1])):
            continue
        name, text = decls[0].spelling, src.src(stmt)
        if n == 0 or "static" in text or "__shared__" in text or \
                sum(1 for c in walk(src.fn) if kind(c) in ("VAR_DECL", "PARM_DECL") and c.spelling == name) > 1:
            return []
        for s in stmts[:n]:
            kids = list(s.get_children()) if kind(s) == "DECL_STMT" else []
            if not kids or any(kind(d) != "VAR_DECL" or d.spelling == name or
                               [k for k in d.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
                               for d in kids) or re.search(r"\b(__shared__|static|extern)\b", src.src(s)):
                return []       # only value-less locals: a value before the index is state the rewrites keep apart
        a, b = _whole_lines(src, stmt)
        top = _whole_lines(src, stmts[0])[0]
        moved = src.text[a:b] if src.text[a:b].endswith("\n") else src.text[a:b] + "\n"
        return [(top, top, moved), (a, b, "")]
    return []
