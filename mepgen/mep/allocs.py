"""Where a launch's device buffer is allocated, and with how many bytes, the ways applications write it.

A pointer argument is followed back to the allocation that made it: a `cudaMalloc(&p, bytes)` in its function,
through function parameters to the callers' arguments (any file), through an allocating helper that returns the
buffer (`float* v = alloc<float>(n)`) or allocates through its pointer parameter (`make(&d, n)`), to a member of
a class or struct allocated in another function (`cudaMalloc(&this->buf, ...)`, `cudaMalloc(&s.buf, ...)`),
to the elements of a small array of buffers allocated alike (`float* t[2]; cudaMalloc(&t[0], b);
cudaMalloc(&t[1], b);`), and from a pointer into a buffer (`d + off`) to the buffer's end. Bytes are resolved where the allocation is written (`Resolver`), with a helper's
parameters bound to the call's arguments. Allocations of one member or array that disagree are not chosen
between: no count (the kernel's own bounds, else a todo).
"""
from __future__ import annotations

from ..parsing import clang
from .project import call_name, walk
from .resolve import Resolver
from .syntax import init_expr, join_tokens, operator_of, strip

ALLOCATORS = ("cudaMalloc", "cudaMallocManaged", "cudaMallocAsync", "cudaMallocFromPoolAsync")
_CASTS = ("CSTYLE_CAST_EXPR", "CXX_STATIC_CAST_EXPR", "CXX_REINTERPRET_CAST_EXPR", "PAREN_EXPR",
          "CXX_FUNCTIONAL_CAST_EXPR")
_MAX_DEPTH = 8


def allocation(r: Resolver, c, depth: int = 0) -> tuple[str, str] | None:
    """(bytes expression, allocator) of the device buffer a pointer expression points to, or None."""
    c = _peel(c)
    if c is None or depth > _MAX_DEPTH:
        return None
    k = c.kind.name
    if k == "CALL_EXPR":
        return _returned(r, c, depth)
    if k == "BINARY_OPERATOR":
        return _offset(r, c, depth)
    if k == "MEMBER_REF_EXPR" and c.referenced is not None and c.referenced.kind.name == "FIELD_DECL":
        return _agreed(r, [*_allocated(r, c.referenced.get_usr(), depth), *_assigned(r, c.referenced, depth)])
    if k == "ARRAY_SUBSCRIPT_EXPR":
        array = _array_of_buffers(r, next(iter(c.get_children()), None), depth)
        return _agreed(r, _allocated(r, array.get_usr(), depth, element=True)) if array is not None else None
    if k != "DECL_REF_EXPR" or c.referenced is None:
        return None
    d = c.referenced
    if d.kind.name == "PARM_DECL":
        for frame in reversed(r.bindings):
            if d.get_usr() in frame:
                return allocation(r, frame[d.get_usr()][0], depth + 1)
        index, fn = r.param_index(d)
        for call, caller in r.p.calls.get(fn.get_usr(), []) if fn is not None else []:
            args = list(call.get_arguments())
            with r.inside(caller, call.extent.start.offset):
                found = allocation(r, args[index], depth + 1) if index < len(args) else None
            if found:
                return found
        return None
    if d.kind.name != "VAR_DECL":
        return None
    found = _allocated(r, d.get_usr(), depth)
    if found and _is_global(d):
        return _agreed(r, found)
    if found:
        return found[0]                 # a local's first allocation, as the application writes it first
    init = init_expr(d)
    if init is not None:
        got = allocation(r, init, depth + 1)
        if got:
            return got
    return _agreed(r, _assigned(r, d, depth))


def _array_of_buffers(r: Resolver, c, depth: int):
    """The declaration of the array of buffers `c` names: a local `float* t[2]`, or a parameter it was passed
    to (`void step(float* t[2])`, followed to the callers' arguments)."""
    c = _peel(c)
    if c is None or c.kind.name != "DECL_REF_EXPR" or c.referenced is None or depth > _MAX_DEPTH:
        return None
    d = c.referenced
    if d.kind.name == "VAR_DECL" and d.type.get_canonical().kind.name == "CONSTANTARRAY":
        return d
    if d.kind.name != "PARM_DECL":
        return None
    for frame in reversed(r.bindings):
        if d.get_usr() in frame:
            return _array_of_buffers(r, frame[d.get_usr()][0], depth + 1)
    index, fn = r.param_index(d)
    for call, caller in r.p.calls.get(fn.get_usr(), []) if fn is not None else []:
        args = list(call.get_arguments())
        found = _array_of_buffers(r, args[index], depth + 1) if index < len(args) else None
        if found is not None:
            return found
    return None


def _offset(r: Resolver, c, depth: int) -> tuple[str, str] | None:
    """`base + off` (or `off + base`), a pointer into a buffer: the bytes from there to the buffer's end."""
    kids = list(c.get_children())
    if len(kids) != 2 or operator_of(c, kids) != "+":
        return None
    ptr = [x for x in kids if x.type.get_canonical().kind.name == "POINTER"]
    if len(ptr) != 1:
        return None
    other = kids[1] if ptr[0] is kids[0] else kids[0]
    size = ptr[0].type.get_canonical().get_pointee().get_size()
    base = allocation(r, ptr[0], depth + 1)
    off = r.expr(other)
    if base is None or off is None or size <= 0:
        return None
    return f"({base[0]}) - ({off}) * {size}", base[1]


def explain(r: Resolver, arg) -> str:
    """Why no element count came from the allocation of a launch argument: the allocations found and what
    stopped each (their bytes not traced, and why; sizes that disagree), or that none was found."""
    r.alloc_why = []
    try:
        allocation(r, arg)
        said = list(dict.fromkeys(r.alloc_why))
    finally:
        del r.alloc_why
    text = r.p.text(arg) if arg is not None else "?"
    if said:
        return f"the launch passes `{text}`: " + "; ".join(said[:3])
    return (f"the launch passes `{text}`, and mepgen found no allocation of it it can follow (a cudaMalloc "
            "through a library, a container or a function it does not read)")


def _say(r: Resolver, why: str) -> None:
    if hasattr(r, "alloc_why"):
        r.alloc_why.append(why)


def _is_global(d) -> bool:
    return d.semantic_parent is None or d.semantic_parent.kind.name in ("NAMESPACE", "TRANSLATION_UNIT")


def _peel(c):
    """Skip implicit conversions, parentheses and casts: `(void**)&d` -> `&d`'s operand stays an operator."""
    c = strip(c)
    while c is not None and c.kind.name in _CASTS:
        kids = [x for x in c.get_children() if x.kind.name not in ("TYPE_REF", "TEMPLATE_REF", "NAMESPACE_REF")]
        c = strip(kids[-1]) if kids else None
    return c


def _target(arg):
    """The operand of `&x` (after casts) in an allocator's first argument, or the argument itself."""
    a = _peel(arg)
    if a is not None and a.kind.name == "UNARY_OPERATOR" and operator_of(a, list(a.get_children())) == "&":
        return _peel(next(iter(a.get_children()), None)), True
    return a, False


def _names(c, usr: str, element: bool) -> bool:
    """Whether an allocation target is the variable/field `usr` itself (or one element of it: `t[0]`)."""
    if c is None:
        return False
    if element:
        if c.kind.name != "ARRAY_SUBSCRIPT_EXPR":
            return False
        c = _peel(next(iter(c.get_children()), None))
        if c is None:
            return False
    return c.kind.name in ("DECL_REF_EXPR", "MEMBER_REF_EXPR") and c.referenced is not None \
        and c.referenced.get_usr() == usr


def _allocated(r: Resolver, usr: str, depth: int, element: bool = False) -> list[tuple[str, str] | None]:
    """Every allocation whose target is `usr` (an allocator's `&x`, or `make(&x, ...)`: a function that passes
    its pointer parameter to an allocator), with its bytes resolved where it is written (None: not resolved)."""
    out = []
    for fn, call, caller, i in _index(r.p).get((usr, element), []):
        if fn is None:                                  # an allocator itself
            mark = len(r.unsure)
            with r.inside(caller, call.extent.start.offset):
                size = r.call_arg(call, 1)
            out.append((size, call_name(call)) if size is not None else None)
            if size is None:
                _unresolved(r, call, mark)
        else:
            out.append(_through_parameter(r, fn, call, caller, i, depth))
    return [x for x in out if x != "skip"]


def _index(p) -> dict:
    """(target usr, element?) -> [(function or None for an allocator, call, caller, argument index)] of every
    call that takes the address of a variable, field or array element (built once per project)."""
    cached = getattr(p, "_mepgen_alloc_index", None)
    if cached is not None:
        return cached
    index: dict = {}
    for usr_fn, calls in p.calls.items():
        fn = p.functions.get(usr_fn)
        for call, caller in calls:
            alloc = call_name(call) in ALLOCATORS
            if not alloc and (fn is None or not p.in_app(fn)):
                continue
            for i, a in enumerate(call.get_arguments()):
                if alloc and i > 0:
                    break
                t, addressed = _target(a)
                if not addressed or t is None:
                    continue
                element = t.kind.name == "ARRAY_SUBSCRIPT_EXPR"
                base = _peel(next(iter(t.get_children()), None)) if element else t
                if base is not None and base.kind.name in ("DECL_REF_EXPR", "MEMBER_REF_EXPR") \
                        and base.referenced is not None:
                    entry = (None if alloc else fn, call, caller, i)
                    bucket = index.setdefault((base.referenced.get_usr(), element), [])
                    if all(e[1] is not call or e[3] != i for e in bucket):
                        bucket.append(entry)
    p._mepgen_alloc_index = index
    return index


def _through_parameter(r: Resolver, fn, call, caller, index: int, depth: int) -> tuple[str, str] | None:
    """The allocation `fn` makes through its pointer parameter `index` (`void make(float** p, int n) {
    cudaMalloc(p, n * sizeof(float)); }`), its parameters bound to the call's arguments; "skip" when `fn`
    makes none there (it only reads or fills the buffer)."""
    parms = [x for x in fn.get_children() if x.kind.name == "PARM_DECL"]
    if index >= len(parms) or depth > _MAX_DEPTH:
        return "skip"
    pusr = parms[index].get_usr()
    for n in walk(fn):
        if n.kind.name == "CALL_EXPR" and n.spelling in ALLOCATORS:
            args = list(n.get_arguments())
            t, addressed = _target(args[0]) if args else (None, False)
            if len(args) >= 2 and not addressed and _names(t, pusr, False):
                mark = len(r.unsure)
                with r.inside(caller, call.extent.start.offset), _bound(r, caller, call, parms), \
                        r.inside(fn, n.extent.start.offset):
                    size = r.call_arg(n, 1)
                if size is None:
                    _unresolved(r, n, mark)
                return (size, n.spelling) if size is not None else None
    return "skip"


def _assigned(r: Resolver, d, depth: int) -> list[tuple[str, str] | None]:
    """The allocations of the values assigned to a variable or field (`areas = alloc<float>(n);`)."""
    out = []
    local = d.kind.name == "VAR_DECL" and not _is_global(d)
    # a local's own function (several programs of one folder each have a `main`, indexed once by the project)
    found = _assignments(r.p, [d.semantic_parent] if local else None).get(d.get_usr(), [])
    for fn, node, rhs in found:
        with r.inside(fn, node.extent.start.offset):
            out.append(allocation(r, rhs, depth + 1))
    return out


def _assignments(p, functions: list | None = None) -> dict:
    """usr of a variable or field -> [(function, `=` node, right-hand side)] of every pointer assignment in the
    application's functions (built once per project), or in the functions given (not kept)."""
    cached = getattr(p, "_mepgen_pointer_assignments", None)
    if cached is not None and functions is None:
        return cached
    index: dict = {}
    for fn in functions if functions is not None else p.functions.values():
        if fn is None or not p.in_app(fn):
            continue
        for n in walk(fn):
            if n.kind.name != "BINARY_OPERATOR" or n.type.get_canonical().kind.name != "POINTER":
                continue
            kids = list(n.get_children())
            if len(kids) != 2 or operator_of(n, kids) != "=":
                continue
            lhs = _peel(kids[0])
            if lhs is not None and lhs.kind.name in ("DECL_REF_EXPR", "MEMBER_REF_EXPR") and lhs.referenced is not None:
                index.setdefault(lhs.referenced.get_usr(), []).append((fn, n, kids[1]))
    if functions is None:
        p._mepgen_pointer_assignments = index
    return index


def _returned(r: Resolver, call, depth: int) -> tuple[str, str] | None:
    """The allocation a helper makes and returns (`T* alloc(int n) { T* t; cudaMalloc(&t, sizeof(T) * n);
    return t; }`), its parameters bound to the call's arguments."""
    ref = call.referenced
    if ref is None:
        return None
    fn = r.p.find_function(ref.get_usr())
    if fn is None:
        tmpl = clang.specialized_template(ref)
        fn = r.p.find_function(tmpl.get_usr()) if tmpl is not None else None
    if fn is None or not r.p.in_app(fn):
        return None
    returns = [n for n in walk(fn) if n.kind.name == "RETURN_STMT"]
    if len(returns) != 1:
        return None
    value = _peel(next(iter(returns[0].get_children()), None))
    if value is None or value.kind.name != "DECL_REF_EXPR" or value.referenced is None:
        return None
    parms = [x for x in fn.get_children() if x.kind.name == "PARM_DECL"]
    with _bound(r, None, call, parms):
        with r.inside(fn, returns[0].extent.start.offset):
            return allocation(r, value, depth + 1)


class _bound:
    """Bind a function's parameters to a call's arguments while its body is read (Resolver.bindings)."""

    def __init__(self, r: Resolver, caller, call, parms):
        self.r, self.frame = r, {p.get_usr(): (a, caller) for p, a in zip(parms, call.get_arguments())}

    def __enter__(self):
        self.r.bindings.append(self.frame)

    def __exit__(self, *exc):
        self.r.bindings.pop()


def _agreed(r: Resolver, found: list) -> tuple[str, str] | None:
    """The allocation when every one found resolves to the same bytes; None when any disagrees or is unresolved."""
    if not found or any(f is None for f in found):
        return None
    sizes = list(dict.fromkeys(" ".join(f[0].split()) for f in found))
    if len(sizes) > 1:
        _say(r, f"it is allocated in {len(found)} places with different sizes ({', '.join(f'`{x}`' for x in sizes[:3])}"
                f"{', ...' if len(sizes) > 3 else ''}), and mepgen does not choose between them")
        return None
    return found[0]


def _unresolved(r: Resolver, call, mark: int) -> None:
    """Say that an allocation's bytes were not traced, with the resolver's reason (a file, the run...)."""
    why = r.unsure[-1] if len(r.unsure) > mark else None
    _say(r, f"it is allocated at {r.where(call)} with `{join_tokens(r.call_arg_tokens(call, 1))}` bytes, which mepgen "
            f"could not trace to a value{f' ({why})' if why else ''}")
