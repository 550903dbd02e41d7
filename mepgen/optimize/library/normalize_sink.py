"""A normalization step (normalize.py runs it with the others): a C89 local declared at the top of the kernel
and first set inside the block where all its uses are.

`float acc; ... if (j < n) { acc = 0.0f; for (...) acc += ...; y[j] = acc; }` becomes
`if (j < n) { float acc = 0.0f; for (...) acc += ...; y[j] = acc; }`: the declaration moves to the statement
that first sets it, so the transformations see the accumulator declared with its start value right before its
loop, as they do in the C99 spelling. It applies only where nothing changes: a single scalar declarator without
a value, every use of it inside one nested block, and the first statement of that block that mentions it is
`name = value;` with a value that does not read it (so no use can see the value before the move).
"""
from __future__ import annotations

from .analysis import pure_call, check_pure
from .cursors import Refused, _unwrap, _whole_lines, kind, walk


def _same(ref, decl) -> bool:
    return ref is not None and ref.spelling == decl.spelling and ref.location.offset == decl.location.offset


def _inside(inner, outer) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def _single_var_decls(stmts: list):
    """(index, statement, VAR_DECL) of each statement among `stmts` that declares exactly one variable."""
    for n, stmt in enumerate(stmts):
        if kind(stmt) == "DECL_STMT":
            decls = list(stmt.get_children())
            if len(decls) == 1 and kind(decls[0]) == "VAR_DECL":
                yield n, stmt, decls[0]


def _sink_target(src, stmt, d, blocks):
    """The statement `d = value;` that first sets the value-less local `d` (declared by `stmt` at the top of the
    body) inside the one nested block holding all its uses, where the declaration can move; None otherwise."""
    if [k for k in d.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]:
        return None                                      # declared with a value (or array extents)
    text = src.text[slice(*src.span(stmt))]
    head = src.text[d.extent.start.offset:d.location.offset]
    if any(ch in text for ch in "*&[(") or any(w in head for w in ("__shared__", "static", "extern")):
        return None
    uses = [src.span(c) for c in walk(src.body) if kind(c) == "DECL_REF_EXPR" and _same(c.referenced, d)]
    if not uses:
        return None
    holding = [b for b in blocks if all(_inside(u, src.span(b)) for u in uses)]
    if not holding:
        return None
    block = min(holding, key=lambda b: src.span(b)[1] - src.span(b)[0])
    if src.span(block)[0] < src.span(stmt)[1]:
        return None
    first = next((s for s in block.get_children() if any(_inside(u, src.span(s)) for u in uses)), None)
    kids = list(first.get_children()) if first is not None else []
    if first is None or kind(first) != "BINARY_OPERATOR" or src.operator(first) != "=" or \
            kind(_unwrap(kids[0])) != "DECL_REF_EXPR" or not _same(_unwrap(kids[0]).referenced, d) or \
            any(_inside(u, src.span(kids[1])) for u in uses):
        return None
    return first


def _nested_blocks(src) -> list:
    return [c for c in walk(src.body) if kind(c) == "COMPOUND_STMT" and src.span(c) != src.span(src.body)]


def sunk_declarations(src) -> list:
    """Edits for the first top-level declaration that can move to its first assignment; [] when none can."""
    blocks = _nested_blocks(src)
    for _, stmt, d in _single_var_decls(list(src.body.get_children())):
        first = _sink_target(src, stmt, d, blocks)
        if first is None:
            continue
        head = src.text[d.extent.start.offset:d.location.offset]
        a, b = src.span(first)
        return [(*_whole_lines(src, stmt), ""), (a, b, f"{head.strip()} {src.text[a:b].strip()}")]
    return []


def split_declarations(src) -> list:
    """`int lo, hi, back;` at the top of the body, value-less scalars of which one could move to where it is first
    set (as sunk_declarations moves one), written as one declaration per variable (`int lo; int hi; int back;`),
    so that each can move on its own."""
    blocks = _nested_blocks(src)
    for stmt in src.body.get_children():
        decls = list(stmt.get_children()) if kind(stmt) == "DECL_STMT" else []
        if len(decls) < 2 or any(kind(d) != "VAR_DECL" for d in decls):
            continue
        if not any(_sink_target(src, stmt, d, blocks) is not None for d in decls):
            continue
        if any([k for k in d.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")] for d in decls):
            continue
        head = src.text[decls[0].extent.start.offset:decls[0].location.offset].strip()
        a, b = src.span(stmt)
        end = ";" if src.text[b - 1] == ";" else ""
        return [(a, b, " ".join(f"{head} {d.spelling};" for d in decls).rstrip(";") + end)]
    return []


def deferred_declarations(src) -> list:
    """`T v = value;` that the statements right after it do not use, moved to just before its first use, where
    the statements it passes write no memory, no variable that `value` reads, and call nothing that may have side
    effects (`float old = y[j]; float acc = 0; for (...) acc += ...; y[j] = f(acc, old);` becomes
    `float acc = 0; for (...) acc += ...; float old = y[j]; y[j] = ...`): the accumulator then stands right
    before its loop, as the reductions' rewrites expect. The value read is the same (nothing it reads changed)."""
    for block in (c for c in walk(src.body) if kind(c) == "COMPOUND_STMT"):
        stmts = list(block.get_children())
        for n, stmt, d in _single_var_decls(stmts):
            init = [k for k in d.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF", "TEMPLATE_REF")]
            if not init or "__shared__" in src.src(stmt) or "static" in src.src(stmt):
                continue
            later = stmts[n + 1:]
            use = next((k for k, s in enumerate(later)
                        if any(kind(c) == "DECL_REF_EXPR" and _same(c.referenced, d) for c in walk(s))), None)
            if use is None or use < 2 or not any(kind(s) in ("FOR_STMT", "WHILE_STMT", "DO_STMT") for s in later[:use]):
                continue            # only past a loop: the move is for the reductions' shape, nothing else churns
            try:
                check_pure(src, init[-1], "the value")
            except Refused:
                continue
            reads = src.refs(init[-1])
            passed = later[:use]
            ok = True
            for s in passed:
                jumps = {kind(c) for c in walk(s)} & {"RETURN_STMT", "GOTO_STMT", "LABEL_STMT", "BREAK_STMT",
                                                      "CONTINUE_STMT"}
                loop = kind(s) in ("FOR_STMT", "WHILE_STMT", "DO_STMT")
                if jumps - ({"BREAK_STMT", "CONTINUE_STMT"} if loop else set()):
                    ok = False              # control could leave the block before the first use
                for w in src.writes(s):
                    target = _strip(list(w.get_children())[0])
                    if kind(target) != "DECL_REF_EXPR" or target.spelling in reads:
                        ok = False          # a store to memory, or to a variable the value reads
                if any(kind(c) == "CALL_EXPR" and not pure_call(src, c)
                       for c in walk(s)):
                    ok = False
                if not ok:
                    break
            if not ok:
                continue
            a, _ = _whole_lines(src, later[use])
            text = src.text[slice(*_whole_lines(src, stmt))]
            if not text.endswith("\n"):
                text += "\n"
            return [(*_whole_lines(src, stmt), ""), (a, a, text)]
    return []


def _strip(c):
    while kind(c) in ("UNEXPOSED_EXPR", "PAREN_EXPR") and len(list(c.get_children())) == 1:
        c = list(c.get_children())[0]
    return c
