"""Host values that come from what the application reads or computes while it runs.

A size set by `fscanf(fp, "%d", &n)`, by a function of the application that reads its input file, by `in >> n`,
or a scalar drawn with `rand()` or copied back from the GPU has no value in the sources: no static reading can
give it, and its todo says so with a precise kind (`file`, `runtime`: mepgen/todokind.py), so the todo is not
mistaken for a value mepgen merely failed to trace. :class:`Why` is such a reason: text for the person, kind for
`mepgen ready --json`.
"""
from __future__ import annotations

import re

from .project import walk
from .syntax import operator_of, strip

#: calls of the C/C++ library that read input, and what they read
FILE_READERS = {"fscanf": "file", "fread": "file", "fgets": "file", "getline": "file", "fgetc": "file",
                "getc": "file", "read": "file", "ftell": "the size of a file", "fstat": "the size of a file",
                "scanf": "standard input", "gets": "standard input",
                "getchar": "standard input"}
#: calls whose value depends on chance, the clock, or what the GPU computed
RUNTIME_CALLS = {"rand", "random", "drand48", "lrand48", "rand_r", "time", "clock", "gettimeofday",
                 "clock_gettime"}
DEVICE_COPIES = {"cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpyFromSymbol", "cudaMemcpyFromSymbolAsync"}
#: the name of a function outside the application that reads its input: `read_graph`, `loadData`,
#: `NicsLU_ReadTriplet...` (a word `read`/`load`, not `isReady`)
_READER_NAME = re.compile(r"(?:(?:^|_)(?:[rR]ead|[lL]oad)|(?<=[a-z0-9])(?:Read|Load))(?=[A-Z_0-9]|$)")
_STREAM_TYPES = ("ifstream", "istream", "fstream", "istringstream", "stringstream")


class Why(str):
    """A reason a host value was not derived (the text), with the todo kind it implies (None: the kind follows
    from the text, mepgen/todokind.py)."""
    kind: str | None

    def __new__(cls, text: str, kind: str | None = None):
        s = super().__new__(cls, text)
        s.kind = kind
        return s


def kind_of(reason) -> str | None:
    return getattr(reason, "kind", None)


def reader_call(project, call, depth: int = 3) -> str | None:
    """What a call reads when its value (or what it stores) comes from input: `fscanf` (a library reader), or
    `read_graph -> fscanf` (a function of the application that reads, up to `depth` calls deep); else None."""
    name = call.spelling
    if name in FILE_READERS or name.startswith("operator>>") and _from_stream(call):
        return name if name in FILE_READERS else ">>"
    ref = call.referenced
    if ref is None or depth <= 0:
        return None
    fn = project.find_function(ref.get_usr())     # (no plain source is read for this: every call asks)
    if fn is None:         # a library's reader (`NicsLU_ReadTripletColumnToSparse(path, ...)`): by its name
        return name if _READER_NAME.search(name) and ref.location.file is not None else None
    cache = project.__dict__.setdefault("_reader_calls", {})
    key = (ref.get_usr(), depth)
    if key not in cache:
        cache[key] = None
        for n in walk(fn):
            if n.kind.name == "CALL_EXPR" and n is not call and n.referenced is not None \
                    and n.referenced.get_usr() != ref.get_usr():
                inner = reader_call(project, n, depth - 1)
                if inner is not None:
                    cache[key] = f"{name} -> {inner}"
                    break
    return cache[key]


def _from_stream(call) -> bool:
    kids = list(call.get_children())
    t = f"{kids[0].type.spelling} {kids[0].type.get_canonical().spelling}" if kids else ""   # as written too:
    return any(s in t for s in _STREAM_TYPES)           # an unresolved `std::ifstream` is canonically `int`


def stream_target(node):
    """The operand `in >> x` reads into (x), or None: an overloaded `operator>>` call, or the plain binary `>>`
    libclang leaves when the stream's declarations did not resolve (the lhs is still typed `std::ifstream`)."""
    kids = list(node.get_children())
    if node.kind.name == "CALL_EXPR" and node.spelling == "operator>>" and len(kids) == 3:
        return kids[2]
    if node.kind.name == "BINARY_OPERATOR" and len(kids) == 2 and _from_stream(node):
        return kids[1] if operator_of(node, kids) == ">>" else None
    return None


def origin(project, expr, name: str, where: str) -> Why | None:
    """Why the value of `expr` (what `name` is set to at `where`) cannot be derived statically, when it comes
    from input or run time; None when nothing in it says so."""
    if expr is None:
        return None
    for n in walk(expr):
        data = _data_value(n)
        if data is not None:
            return Why(f"`{name}` is computed from {data} at {where}: data the application computes while it "
                       "runs", "runtime")
        if n.kind.name != "CALL_EXPR":
            continue
        if n.spelling in RUNTIME_CALLS:
            return Why(f"`{name}` is computed from {n.spelling}() at {where}, a value of the run", "runtime")
        read = reader_call(project, n)
        if read is not None:
            return Why(f"`{name}` comes from the application's input at {where} ({read}: {_what(read)})", "file")
    return None


def stored_by(project, call, name: str, where: str) -> Why | None:
    """Why a value a call stores through a pointer or reference (`fscanf(f, "%d", &n)`, `load(&n)`,
    `cudaMemcpy(&n, d_n, ...)`, `in >> n`) is not derivable; None when the call is none of these."""
    if call.kind.name == "BINARY_OPERATOR":
        return Why(f"`{name}` is read from a stream (`>>`) at {where} (the application's input)", "file") \
            if stream_target(call) is not None else None
    if call.spelling in DEVICE_COPIES:
        return Why(f"`{name}` is copied from the GPU by {call.spelling}() at {where}: a value the application "
                   "computes while it runs", "runtime")
    read = reader_call(project, call)
    if read is not None:
        return Why(f"`{name}` is read from the application's input by {read} at {where} ({_what(read)})", "file")
    callee = _library_callee(project, call) if call.kind.name == "CALL_EXPR" else None
    if callee is not None and callee not in _NOT_OUTPUTS and _address_of(call, name):
        # `cublasIsamax(h, n, x, 1, &i)`, `cudaGetDeviceCount(&n)`: a library writes it while the program runs
        return Why(f"`{name}` is written through its address by {callee}() at {where}, a library function: "
                   "a value it computes while the application runs", "runtime")
    return None


def _library_callee(project, call) -> str | None:
    """The name of the function a call calls when it is a library's: declared outside the application, or not
    declared in what mepgen parsed (a library header it does not carry) and defined in no source of the
    application; None for the application's own functions."""
    ref = call.referenced
    if ref is not None:
        return call.spelling if ref.location.file is not None and not project.in_app(ref) else None
    toks = [t.spelling for t in call.get_tokens()]
    name = toks[0] if len(toks) > 1 and toks[1] == "(" and re.fullmatch(r"[A-Za-z_]\w*", toks[0]) else None
    if name is None:
        return None
    project.read_host_files(name)
    if any(fn.spelling == name for fn in project.functions.values()):
        return None
    return name


#: library calls given an address whose value they do not compute from the run (parsing a string, clearing)
_NOT_OUTPUTS = {"sscanf", "memset", "bzero", "std::memset"}


def _address_of(call, name: str) -> bool:
    """Whether one of the call's arguments is `&name` (through casts and parentheses)."""
    for a in call.get_arguments():
        toks = [t.spelling for t in a.get_tokens() if t.spelling not in ("(", ")")]
        if len(toks) >= 2 and toks[-2:] == ["&", name] and all(t not in (",", "[", ".", "->") for t in toks):
            return True
    return False


def _what(read: str) -> str:
    last = read.split(" -> ")[-1]
    return "a stream" if last == ">>" else FILE_READERS.get(last, "a file")


def _is_pointer(c) -> bool:
    return c is not None and c.type.get_canonical().kind.name == "POINTER"


def _data_value(n) -> str | None:
    """What makes a host expression a value of the program's data rather than of its source: a difference of two
    pointers (`end - begin`, the end an algorithm returned), or an element of a host buffer at a varying index
    (`level_ptr[i + 1]`: a pointer's element, not a constant array's). None otherwise."""
    kids = [strip(k) for k in n.get_children()]
    if n.kind.name == "BINARY_OPERATOR" and len(kids) == 2 and all(_is_pointer(k) for k in kids) \
            and operator_of(n, list(n.get_children())) == "-":
        return "a distance between two pointers"
    varying = lambda index: any(x.kind.name in ("DECL_REF_EXPR", "MEMBER_REF_EXPR") for x in walk(index))
    if n.kind.name == "ARRAY_SUBSCRIPT_EXPR" and len(kids) == 2 and _is_pointer(kids[0]) and varying(kids[1]):
        return "an element of a host buffer at a varying index"
    if n.kind.name == "CALL_EXPR" and n.spelling == "operator[]" and len(kids) == 3 and varying(kids[2]) \
            and re.search(r"\b(vector|valarray|deque|array)\b", kids[0].type.spelling + " "
                          + kids[0].type.get_canonical().spelling):
        return "an element of a host container at a varying index"
    return None


def data_read(nodes) -> str | None:
    """What host data one of these expressions reads (`J[i]`, `end - begin`), or None."""
    for node in nodes:
        for n in walk(node) if node is not None else ():
            data = _data_value(n)
            if data is not None:
                return data
    return None
