"""What a host variable holds at a launch: its declaration, then the assignments that certainly run before it.

`dim3 grid(1, 1, 1); ... grid.x = (n + 255) / 256; k<<<grid, block>>>(...)` launches `(n + 255) / 256` blocks,
not one: the value at the launch is the initializer with every assignment on the straight path to the launch
applied in order (`grid.x = ...`, `grid = dim3(...)`, `n = ...`, `n *= 2`). An assignment that may or may not
run before the launch (under an `if`, in a loop that does not hold the launch, or later in a loop that repeats
it) makes the value unsure: the caller gets the reason, never a value. The counter of a loop that holds the
launch takes its first iteration's value, and a variable the loop changes after the launch its value before the
loop, both stated choices (the launch of the loop's first round is the one the MEP reproduces).
"""
from __future__ import annotations

import re

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .cstrings import from_optarg
from .mods import (BRANCHES, LOOPS, Mod, Unsure, _contains, _for_parts, _mentions, _strip, _walk,
                   all_modifications, modifications)
from .readers import Why, data_read, stream_target
from .syntax import init_expr, operator_of, strip

if TYPE_CHECKING:
    from .project import Project

@dataclass
class Step:
    """What one change does to the value: `op`, on `member` or the whole, with the value expression `rhs`
    (`&arg`: the variable's address is argument `index` of `call`, which may store through it)."""
    op: str
    member: str | None
    rhs: object | None
    offset: int
    call: object | None = None
    index: int = -1


def argv_write(m) -> bool:
    """Whether a change sets the variable from the command line, at most under `if (argc ...)` conditions."""
    return m.rhs is not None and _mentions(m.rhs, "argv") and all(
        _mentions(_condition(x), "argc") for x in m.path if x.kind.name in BRANCHES and _condition(x) is not None
        and not _contains(_condition(x), m.node.extent.start.offset)) and not any(
        x.kind.name in LOOPS for x in m.path)


def _named_option(own: list, off: int) -> str | None:
    """`-paths` when the innermost `if` holding a change (in its then-branch) compares a command-line word with
    that one flag (`if (!strcmp(argv[i], "-paths"))`, `else if (strcmp(argv[i], "--paths") == 0)`), and every
    other branch around it tests the command line too; else None."""
    ifs = [x for x in own if x.kind.name == "IF_STMT"]
    if not ifs or any(x.kind.name in BRANCHES and x.kind.name != "IF_STMT" for x in own):
        return None
    kids = list(ifs[-1].get_children())
    if len(kids) < 2 or not _contains(kids[1], off):
        return None
    cond = kids[0]
    words = [t.spelling for t in cond.get_tokens()] if cond.extent.end.offset > cond.extent.start.offset else []
    flags = [w.strip('"') for w in words if re.fullmatch(r'"--?[A-Za-z][\w-]*"', w)]
    if len(flags) != 1 or not any(w in ("argv", "strcmp", "strncmp") for w in words):
        return None
    if not all(_mentions(_condition(x), "argv") or _mentions(_condition(x), "argc") for x in ifs[:-1]):
        return None
    return flags[0]


def _option_letter(own: list, off: int | None = None) -> str | None:
    """The option letter of the innermost `case 'n':` holding a change (getopt's switch), else None. A change in a
    later statement of the case (`case 'd': w = atoi(optarg); h = ...; break;`: libclang puts only the first one
    under the label) has the last label before it in the switch's body, when no other label falls through to it."""
    case = next((x for x in reversed(own) if x.kind.name == "CASE_STMT"), None)
    switch = next((x for x in reversed(own) if x.kind.name == "SWITCH_STMT"), None)
    if case is None and switch is not None and off is not None:
        body = next((x for x in switch.get_children() if x.kind.name == "COMPOUND_STMT"), None)
        stmts = [x for x in body.get_children() if x.extent.start.offset <= off] if body is not None else []
        labels = [i for i, x in enumerate(stmts) if x.kind.name in ("CASE_STMT", "DEFAULT_STMT")]
        if labels and stmts[labels[-1]].kind.name == "CASE_STMT" and (len(labels) == 1 or any(
                x.kind.name in ("BREAK_STMT", "RETURN_STMT") for x in stmts[labels[-2] + 1:labels[-1]])):
            case = stmts[labels[-1]]
    toks = [t.spelling for t in case.get_tokens()][:3] if case is not None else []
    if len(toks) >= 2 and re.fullmatch(r"'[A-Za-z0-9]'", toks[1]):
        return toks[1][1]
    return None


def _condition(stmt):
    kids = list(stmt.get_children())
    return kids[0] if stmt.kind.name in ("IF_STMT", "SWITCH_STMT", "CONDITIONAL_OPERATOR") and kids else None


def _taken(m: Mod, own: list, decide) -> bool | None:
    """Whether a change under `if` statements runs: each condition decided by `decide(cond)` (True, False or
    None when it cannot be decided); None for any other branch (switch, `?:`, a lambda)."""
    if decide is None:
        return None
    for j, x in enumerate(own):
        if x.kind.name not in BRANCHES:
            continue
        if x.kind.name != "IF_STMT":
            return None
        kids = list(x.get_children())
        child = own[j + 1] if j + 1 < len(own) else m.node
        if len(kids) < 2 or child == kids[0]:
            return None
        value = decide(kids[0])
        if value is None:
            return None
        if (child == kids[1]) != bool(value):
            return False
    return True


class _Pending:
    """Changes before the launch that may or may not run (in an earlier loop, under an undecided `if`): harmless
    when a certain assignment on the way to the launch overwrites what they change (`for (...) { g.x = i; k1<<<g,
    b>>>(); } ... for (...) { g.x = i; k2<<<g, b>>>(); }`: k2's `g.x` is its own loop's); otherwise the value is
    unsure. Keyed by member (`x`) or `*` for the whole value."""

    def __init__(self):
        self.why: dict[str, str] = {}
        self.members_since_whole: set[str] = set()

    def note(self, m: Mod, why: str) -> None:
        if m.op in ("?", "&arg"):
            raise Unsure(why)
        self.why.setdefault(m.member or "*", why)
        if m.member is None:
            self.members_since_whole = set()

    def overwritten_by(self, m: Mod) -> None:
        if not self.why:
            return
        if m.op != "=":          # `g.x += 1` or a store through a pointer builds on what may have changed
            hit = self.why.get(m.member or "*") or self.why.get("*") or \
                (None if m.member else next(iter(self.why.values())))
            if hit:
                raise Unsure(hit)
            return
        if m.member is None:
            self.why.clear()
            return
        self.why.pop(m.member, None)
        self.members_since_whole.add(m.member)
        if {"x", "y", "z"} <= self.members_since_whole:
            self.why.pop("*", None)

    def check(self) -> None:
        if self.why:
            raise Unsure(next(iter(self.why.values())))


def _loop_locals(rhs, own: list) -> list:
    """What the loop assigns to the variables `rhs` reads (`tmp = J[k]; sum += tmp;`, `tmp` declared in the loop
    or before it): what the change is computed from, one step back."""
    if rhs is None or not any(x.kind.name in LOOPS for x in own):
        return []
    loop = next(x for x in own if x.kind.name in LOOPS)
    read = {n.referenced.get_usr() for n in _walk(rhs) if n.kind.name == "DECL_REF_EXPR" and n.referenced is not None
            and n.referenced.kind.name == "VAR_DECL"}
    out = []
    for n in _walk(loop):
        if n.kind.name == "VAR_DECL" and n.get_usr() in read:
            out.append(init_expr(n))
        elif n.kind.name == "BINARY_OPERATOR":
            kids = list(n.get_children())
            lhs = _strip(kids[0]) if len(kids) == 2 else None
            if lhs is not None and lhs.kind.name == "DECL_REF_EXPR" and lhs.referenced is not None \
                    and lhs.referenced.get_usr() in read and operator_of(n, kids) == "=":
                out.append(kids[1])
    return out


def _over_data(name: str, at: str, data: str | None):
    """The reason for a change that depends on host data (`sum += J[i]`, `if (d[i] == 1) count++;`)."""
    if data is None:
        return None
    return Why(f"`{name}` changes at {at} with {data}: data the application computes while it runs", "runtime")


def steps_before(fn, usr: str, name: str, launch_path: list, launch_offset: int,
                 choices: list[str], where, argv: list | None = None, decide=None, stored=None) -> list[Step]:
    """The changes of the variable that run before the launch, in order; raises Unsure with the reason when one
    of them may or may not run. `launch_path`: the launch's ancestors (function first). `where(node)`: file:line.
    `stored(call)`: why a call that gets the variable by reference gives it a value of the input (a reader), or
    None."""
    out: list[Step] = []
    later: list = []          # changes after the launch inside a loop that repeats it: carried to the next round
    pending = _Pending()      # changes that may or may not run, unless a later certain assignment overwrites them
    loops = [n for n in launch_path if n.kind.name in LOOPS]
    # where the statement holding the launch (or the call leading to it) ends: a reference taken from there on, in no
    # loop that repeats the launch, cannot reach it (`run(g)` itself passes `g` before its launch runs)
    after_stmt = None
    for parent, child in zip(launch_path, launch_path[1:]):
        if parent.kind.name == "COMPOUND_STMT":
            after_stmt = child.extent.end.offset
    for m in modifications(fn, usr):
        off = m.node.extent.start.offset
        if m.op == "?" and after_stmt is not None and off >= after_stmt and not any(_contains(lp, off) for lp in loops):
            continue        # the address is taken after the launch's statement, in no loop that repeats it
        if m.op == "?":
            node = m.node
            if node.kind.name == "UNARY_OPERATOR":      # `f(.., &n)`: the call that gets the address
                node = next((x for x in reversed(m.path) if x.kind.name == "CALL_EXPR"), node)
            why = stored(node) if stored is not None and node.kind.name in ("CALL_EXPR", "BINARY_OPERATOR") \
                else None
            raise Unsure(why or f"`{name}` is passed by reference or its address is taken at {where(m.node)}")
        # the innermost ancestor shared with the launch
        common = 0
        while common < len(m.path) and common < len(launch_path) and \
                m.path[common] == launch_path[common]:
            common += 1
        shared = m.path[:common]
        own = m.path[common:]
        loop_step = next((lp for lp in reversed(shared) if lp.kind.name in LOOPS), None)
        if loop_step is not None and loop_step.kind.name == "FOR_STMT":
            init, body = _for_parts(loop_step)
            in_body = body is not None and _contains(body, off)
            in_init = init is not None and _contains(init, off)
            if not in_body and not in_init:     # the condition or the increment of a loop holding the launch
                if any(x.kind.name in BRANCHES for x in own):
                    raise Unsure(f"`{name}` changes conditionally at {where(m.node)}")
                inner = launch_path[launch_path.index(loop_step) + 1:] if loop_step in launch_path else []
                gate = next((x for x in inner if _condition(x) is not None and _mentions(_condition(x), name)), None)
                if gate is not None:     # `if (stride >= L) k1<<<>>>(stride); else k2<<<>>>(stride);`
                    raise Unsure(f"`{name}` is a counter of the loop at {where(loop_step)} and the launch sits under "
                                 f"a condition on it at {where(gate)}: the first iteration may not reach the launch")
                choices.append(f"`{name}` is a counter of the loop at {where(loop_step)}: the MEP reproduces the "
                               f"launch of its first iteration")
                continue
        if off >= launch_offset:        # (an assignment is not before itself: `n = 2 * n + 1`)
            loop = next((lp for lp in reversed(loops) if _contains(lp, off)), None)
            if loop is not None:
                later.append((m, loop))
            continue
        if argv is not None and m.rhs is not None and from_optarg(fn, m):
            # `while ((c = getopt(argc, argv, "n:")) != -1) switch (c) { case 'n': n = atoi(optarg); ... }`
            letter = _option_letter(own, off)
            if letter is None or not any(x.kind.name in LOOPS and (_mentions(x, "getopt") or
                                                                   _mentions(x, "getopt_long")) for x in own):
                raise Unsure(f"`{name}` is set from a command-line option at {where(m.node)} in a way mepgen "
                             "does not follow")
            argv.append((m, True, letter))
            continue
        parsed = m.call if m.op == "&arg" and m.call is not None and m.call.spelling == "sscanf" else None
        if argv is not None and (_mentions(m.rhs, "argv") or parsed is not None and
                                 _mentions(next(iter(parsed.get_arguments()), None), "argv")):
            # the command line: under `if (argc ...)` the value before it is the application's default
            # an assignment inside an `if`'s own condition (`if ((n = atoi(argv[1])) <= 0) usage();`) runs,
            # and so does `if (sscanf(argv[2], "%d", &n) != 1) usage();`
            own = [x for x in own if not (_condition(x) is not None and _contains(_condition(x), off))]
            conditional = any(x.kind.name in BRANCHES for x in own)
            named = _named_option(own, off)
            if named is not None:          # `if (!strcmp(argv[i], "-paths")) paths = atoi(argv[++i]);`
                argv.append((m, True, named))
                continue
            if conditional and not all(_mentions(_condition(x), "argc") for x in own if _condition(x) is not None):
                taken = _taken(m, own, decide)      # `if (strcmp(argv[1], "r") == 0) ... else n = f(argv[1]);`
                if taken is False:
                    continue
                if taken is None:
                    raise Unsure(f"`{name}` is assigned from the command line at {where(m.node)} under a condition "
                                 "mepgen does not decide")
                conditional = False
            argv.append((m, conditional, None))
            if not conditional:
                out.clear()
            continue
        data = data_read([m.rhs, *(_condition(x) for x in own), *_loop_locals(m.rhs, own)]) if own else None
        if any(x.kind.name in BRANCHES for x in own):
            taken = _taken(m, own, decide)      # `if (N % 256) blocks++;` over constants: the compiler decides
            if taken is None:
                # `if (binary) read(fd, &n, 4); else ...`: that it may come from the input says more than the branch
                why = stored(m.call) if m.op == "&arg" and stored is not None and m.call is not None else None
                pending.note(m, why or _over_data(name, where(m.node), data) or
                             f"`{name}` is assigned at {where(m.node)} under a condition mepgen does not decide")
                continue
            if not taken:
                continue
        if any(x.kind.name in LOOPS for x in own):
            pending.note(m, _over_data(name, where(m.node), data) or
                         f"`{name}` is assigned at {where(m.node)} in a loop before the launch")
            continue
        pending.overwritten_by(m)
        out.append(Step(m.op, m.member, m.rhs, off, m.call, m.index))
    pending.check()
    for m, loop in later:
        # harmless when every round assigns what it changes again before the launch (`b.x = ...; k<<<b>>>;`)
        fresh = {st.member or "*" for st in out if st.op == "=" and _contains(loop, st.offset)}
        if "*" in fresh or (m.member in fresh if m.member else {"x", "y", "z"} <= fresh):
            continue
        # the launch of the loop's first round sees the value from before it: the MEP reproduces that one
        choices.append(f"`{name}` changes at {where(m.node)}, after the launch, in the loop at {where(loop)} that "
                       "repeats it: the MEP reproduces the launch of its first iteration")
    return out


def path_to(fn, offset: int) -> list:
    """`fn` and every node below it whose extent holds `offset`, outermost first."""
    path, node = [fn], fn
    while True:
        nxt = next((c for c in node.get_children() if _contains(c, offset)), None)
        if nxt is None:
            return path
        path.append(nxt)
        node = nxt


def global_writes(project) -> dict[str, list[tuple[object, Mod]]]:
    """Every change of a namespace-scope variable in the application's functions: usr -> [(function, Mod)]
    (one walk per project: `float g_alpha; void init() { g_alpha = 0.25f; }`)."""
    cache = project.__dict__.setdefault("_global_writes", None)
    if cache is not None:
        return cache
    out: dict[str, list] = {}
    globals_ = set(project.globals)
    for fn in project.functions.values():
        for usr, mods in all_modifications(fn).items():
            if usr in globals_:
                out.setdefault(usr, []).extend((fn, m) for m in mods)
    project.__dict__["_global_writes"] = out
    return out


def modified_locals(project: Project, fn) -> set[str]:
    """USRs of the variables `fn` assigns, increments or takes the address of; one walk per function and
    project (every variable of a launch site asks, and `--all` with chains asks for many sites)."""
    cache = project.__dict__.setdefault("_modified_locals", {})
    key = (fn.get_usr(), str(fn.location.file), fn.extent.start.offset)
    if key not in cache:
        out = set()
        for n in _walk(fn):
            k = n.kind.name
            if k in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR", "UNARY_OPERATOR"):
                kids = list(n.get_children())
                if not kids:
                    continue
                target = base_var(kids[0])
                if target is not None:
                    op = operator_of(n, kids)
                    if op in ("=", "&", "++", "--") or k == "COMPOUND_ASSIGNMENT_OPERATOR":
                        out.add(target.referenced.get_usr())
            elif k == "CALL_EXPR" and n.referenced is not None and not n.spelling.startswith("operator"):
                # passed to a non-const reference parameter (`set_grid(grid, n)` with `dim3& g`): may change
                parms = [x for x in n.referenced.get_children() if x.kind.name == "PARM_DECL"]
                for i, a in enumerate(n.get_arguments()):
                    t = parms[i].type if i < len(parms) else None
                    target = base_var(a) if t is not None and t.kind.name == "LVALUEREFERENCE" \
                        and not t.get_pointee().is_const_qualified() else None
                    if target is not None:
                        out.add(target.referenced.get_usr())
            read = stream_target(n) if k in ("CALL_EXPR", "BINARY_OPERATOR") else None
            target = base_var(read) if read is not None else None
            if target is not None:            # `in >> n`
                out.add(target.referenced.get_usr())
            if k == "CALL_EXPR" and n.spelling.startswith("operator") and n.spelling.endswith("=") \
                    and n.spelling not in ("operator==", "operator!=", "operator<=", "operator>="):
                kids = list(n.get_children())
                target = base_var(kids[0]) if kids else None
                if target is not None:
                    out.add(target.referenced.get_usr())
        cache[key] = out
    return cache[key]


def element_writes(project: Project, d) -> set[str]:
    """{usr of d} when some function assigns an element of array `d` (`a[0] = ...`), else empty."""
    cache = project.__dict__.setdefault("_element_writes", {})
    usr = d.get_usr()
    if usr not in cache:
        fn = d.semantic_parent
        hit = False
        scope = fn if fn is not None and fn.kind.name not in ("NAMESPACE", "TRANSLATION_UNIT") else None
        roots = [scope] if scope is not None else list(project.functions.values())
        for root in roots:
            for n in _walk(root):
                if n.kind.name in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR", "UNARY_OPERATOR"):
                    kids = list(n.get_children())
                    t = strip(kids[0]) if kids else None
                    if t is not None and t.kind.name == "ARRAY_SUBSCRIPT_EXPR":
                        b = strip(next(iter(t.get_children()), None))
                        op = operator_of(n, kids)
                        if b is not None and b.kind.name == "DECL_REF_EXPR" and b.referenced is not None \
                                and b.referenced.get_usr() == usr and (op.endswith("=") and op not in ("==", "!=", "<=", ">=") or op in ("++", "--")):
                            hit = True
                            break
            if hit:
                break
        cache[usr] = {usr} if hit else set()
    return cache[usr]


def base_var(c):
    """The variable an assignment target names: `v` of `v`, `v.x`, `(v)`; None for anything else."""
    c = strip(c)
    while c is not None and c.kind.name in ("PAREN_EXPR", "MEMBER_REF_EXPR"):
        kids = list(c.get_children())
        if not kids or c.kind.name == "MEMBER_REF_EXPR" and any(t.spelling == "->" for t in c.get_tokens()):
            return None
        c = strip(kids[0])
    if c is not None and c.kind.name == "DECL_REF_EXPR" and c.referenced is not None:
        return c
    return None
