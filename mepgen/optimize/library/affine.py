"""Index expressions as integer polynomials over named atoms, for the tiling transformations.

`(j - 1) * g.nx + i` becomes {(g.nx, j): 1, (g.nx,): -1, (i,): 1}: a monomial is the sorted tuple of its
atoms (identifiers and `s.field` member reads), the value its integer coefficient. Local constants are
substituted by their initializers, so `idx - plane` with `idx = k * plane + j * nx + i` is seen through.
Whatever is not a sum of products of atoms and integer literals (a division, a call, an array read, a
ternary) is refused by name: the tiling rewrites must prove where every neighbour lies, never guess.
"""
from __future__ import annotations

from .analysis import squash
from .macros import tokens
from .source import KernelSource, Refused, kind, walk

Poly = dict


def _clean(p: Poly) -> Poly:
    return {m: c for m, c in p.items() if c != 0}


def add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
    return _clean(out)


def mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            out[m] = out.get(m, 0) + ca * cb
    return _clean(out)


def const(v: int) -> Poly:
    return _clean({(): v})


def atom(name: str) -> Poly:
    return {(name,): 1}


def substitute(p: Poly, env: dict[str, Poly]) -> Poly:
    """Replace atoms by polynomials (a helper's parameters by the caller's arguments)."""
    out: Poly = {}
    for m, c in p.items():
        term = const(c)
        for a in m:
            term = mul(term, env.get(a, atom(a)))
        out = add(out, term)
    return out


def param_sizes(spec) -> dict[str, str]:
    """Scalar parameter -> the size symbol mep.yaml gives it (`nj` -> `NJ` where the launch passes NJ): a bound
    written through the parameter (`_PB_NJ - 1` expanding to `nj - 1`) compared with a stride written through the
    size (`i * NJ + j`) is the same quantity."""
    out = {}
    for prm in spec.params:
        v = str(prm.value or "").strip()
        if prm.role == "scalar" and v.isidentifier() and v in spec.sizes:
            out[prm.name] = v
    return out


def text(p: Poly) -> str:
    """C text of a polynomial (for strides in the generated code)."""
    parts = []
    for m, c in sorted(p.items()):
        body = " * ".join(m)
        if not body:
            parts.append(str(c))
        else:
            parts.append(body if c == 1 else f"{c} * {body}")
    return " + ".join(parts) or "0"


def local_constants(src: KernelSource, root, keep: set[str]) -> dict[str, object]:
    """Locals of `root` declared with an initializer and never assigned: name -> initializer cursor."""
    written = set()
    for w in src.writes(root):
        kids = list(w.get_children())
        target = kids[0] if kids else None
        while target is not None and kind(target) in ("UNEXPOSED_EXPR", "PAREN_EXPR") and list(target.get_children()):
            target = list(target.get_children())[0]
        if target is not None and kind(target) == "DECL_REF_EXPR":     # `x = ...`; `p[x] = ...` writes memory
            written.add(target.spelling)
    out = {}
    for c in walk(root):
        if kind(c) == "VAR_DECL" and c.spelling not in written and c.spelling not in keep:
            kids = [k for k in c.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
            if kids and "__shared__" not in src.src(c):
                out[c.spelling] = kids[-1]
    return out


def poly(src: KernelSource, c, env: dict[str, object], depth: int = 0) -> Poly:
    """The polynomial of an integer expression; Refused when it is not one (the reason names the part)."""
    if depth > 40:
        raise Refused("an index expression nests too deeply to analyse")
    k = kind(c)
    kids = list(c.get_children())
    if k in ("UNEXPOSED_EXPR", "PAREN_EXPR", "CSTYLE_CAST_EXPR", "CXX_FUNCTIONAL_CAST_EXPR", "CXX_STATIC_CAST_EXPR") and kids:
        return poly(src, kids[-1], env, depth + 1)
    if k != "MEMBER_REF_EXPR" and _uses_macro(src, src.src(c)):
        return text_poly(src, src.expand(src.src(c)), env, depth + 1)
    if k == "INTEGER_LITERAL":
        return literal(src, src.src(c))
    if k == "DECL_REF_EXPR":
        if c.spelling in env:
            return poly(src, env[c.spelling], {n: v for n, v in env.items() if n != c.spelling}, depth + 1)
        return atom(c.spelling)
    if k == "MEMBER_REF_EXPR" and kids and kind(kids[0]) == "DECL_REF_EXPR":
        return atom(squash(src.src(c)))
    if k == "BINARY_OPERATOR" and len(kids) == 2:
        op = src.operator(c)
        a, b = poly(src, kids[0], env, depth + 1), poly(src, kids[1], env, depth + 1)
        if op == "+":
            return add(a, b)
        if op == "-":
            return add(a, b, -1)
        if op == "*":
            return mul(a, b)
        raise Refused(f"non-affine index: `{squash(src.src(c))}` uses `{op}`")
    if k == "UNARY_OPERATOR" and len(kids) == 1:
        t = squash(src.src(c))
        if t.startswith("-"):
            return mul(const(-1), poly(src, kids[0], env, depth + 1))
        if t.startswith("+"):
            return poly(src, kids[0], env, depth + 1)
    if k == "CALL_EXPR":
        inlined = _index_helper(src, c, env, depth)
        if inlined is not None:
            return inlined
    if k in ("ARRAY_SUBSCRIPT_EXPR", "CALL_EXPR"):
        raise Refused(f"data-dependent index: `{squash(src.src(c))}` reads memory or calls a function")
    raise Refused(f"non-affine index: `{squash(src.src(c))}` is not a sum of products of integers")


def _index_helper(src: KernelSource, call, env, depth: int) -> Poly | None:
    """A call of an index helper defined in kernel.cu whose body is `return EXPR;` (`idx3(x, y, z)` returning
    `x + y * nx + z * nx * ny`): EXPR's polynomial with the helper's parameters bound to the arguments'."""
    ref = call.referenced
    fn = (ref.get_definition() or ref) if ref is not None else None
    if fn is None or kind(fn) != "FUNCTION_DECL" or fn.location.file is None or fn.location.file.name != src.path:
        return None
    body = next((k for k in fn.get_children() if kind(k) == "COMPOUND_STMT"), None)
    stmts = list(body.get_children()) if body is not None else []
    if len(stmts) != 1 or kind(stmts[0]) != "RETURN_STMT" or not list(stmts[0].get_children()):
        return None
    names = [p.spelling for p in fn.get_arguments()]
    args = list(call.get_arguments())
    if len(names) != len(args) or not all(names):
        return None
    inner = poly(src, list(stmts[0].get_children())[0], {}, depth + 1)
    return substitute(inner, {n: poly(src, a, env, depth + 1) for n, a in zip(names, args)})


def _uses_macro(src: KernelSource, t: str) -> bool:
    """Whether the text uses a macro of kernel.cu other than the MEP's size symbols (cursors inside such an
    expansion have extents that do not say what they compute)."""
    macros = src.macros()
    return any(tok in macros and tok not in src.spec.sizes for tok in tokens(t))


def text_poly(src: KernelSource, t: str, env: dict[str, object], depth: int = 0) -> Poly:
    """The polynomial of an expanded macro's text: integers, identifiers (`s.f` members), + - * and parentheses;
    Refused for anything else. Identifiers bound in `env` (local constants) are seen through as in `poly`."""
    toks = tokens(t)
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else ""

    def take():
        pos[0] += 1
        return toks[pos[0] - 1]

    def primary() -> Poly:
        tok = take() if peek() else ""
        if tok == "(":
            p = sum_()
            if take() != ")":
                raise Refused(f"non-affine index: `{t}` (unbalanced parentheses)")
            return p
        if tok == "-":
            return mul(const(-1), primary())
        if tok == "+":
            return primary()
        n = int_value(tok)
        if n is not None:
            return const(n)
        if tok.isidentifier():
            if peek() == ".":
                take()
                return atom(f"{tok}.{take()}")
            if peek() == "(":
                raise Refused(f"data-dependent index: `{t}` calls {tok}")
            if peek() == "[":
                raise Refused(f"data-dependent index: `{t}` reads memory")
            if tok in env and depth < 40:
                return poly(src, env[tok], {n: v for n, v in env.items() if n != tok}, depth + 1)
            return atom(tok)
        raise Refused(f"non-affine index: `{t}` is not a sum of products of integers")

    def product() -> Poly:
        p = primary()
        while peek() in ("*", "/", "%"):
            op = take()
            if op != "*":
                raise Refused(f"non-affine index: `{t}` uses `{op}`")
            p = mul(p, primary())
        return p

    def sum_() -> Poly:
        p = product()
        while peek() in ("+", "-"):
            sign = 1 if take() == "+" else -1
            p = add(p, product(), sign)
        return p

    out = sum_()
    if pos[0] != len(toks):
        raise Refused(f"non-affine index: `{t}` is not a sum of products of integers")
    return out


def literal(src: KernelSource, spelled: str) -> Poly:
    """An integer literal as the application spells it: a number, or a macro that expands to one (`NJ`, a size
    symbol of the MEP, stays the atom `NJ`; `ROWS` defined as `BOUND(NR, nr)` is the atom `NR`)."""
    t = squash(spelled)
    n = int_value(t)
    if n is not None:
        return const(n)
    e = src.expand(t)
    n = int_value(e)
    if n is not None:
        return const(n)
    if e.isidentifier():
        return atom(e)
    raise Refused(f"the macro `{t}` expands to `{e}`, not a number or a size symbol")


def int_value(t: str) -> int | None:
    """The value of a C integer literal (`16`, `0x10`, `16u`), None for anything else."""
    try:
        return int(t.strip().rstrip("uUlL"), 0)
    except ValueError:
        return None


def refs_of(p: Poly) -> set[str]:
    return {a for m in p for a in m}
