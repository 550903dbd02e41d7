"""Shared applicability analyses over libclang cursors: thread indices, canonical loops, pure expressions,
affine index terms. Each answers a narrow question exactly and says no when unsure: a transformation
built on them refuses rather than guesses. `src` is a source.KernelSource: the normalization steps that
KernelSource runs use these analyses, so this module sits below source.py and names it only here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .cursors import Refused, kind, strip, walk
from .thread_index import is_global_index, why_not  # noqa: F401  (is_global_index: the analyses' name for it)

#: device functions without side effects an addend may call
#: the CUDA math API's functions of values only (each `f` name also without the `f`, its double form): none writes
#: memory or reads another thread's values; those with a pointer argument (sincosf, modff, frexpf, remquof, nanf)
#: are not here
_MATH = ("acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh cospi cyl_bessel_i0 cyl_bessel_i1 erf "
         "erfc erfcinv erfcx erfinv exp exp10 exp2 expm1 fabs fdim floor fma fmax fmin fmod hypot ilogb j0 j1 jn "
         "ldexp lgamma llrint llround log log10 log1p log2 logb lrint lround nearbyint nextafter norm3d norm4d normcdf "
         "normcdfinv pow rcbrt remainder rhypot rint rnorm3d rnorm4d round rsqrt scalbln scalbn sin sinh sinpi sqrt "
         "tan tanh tgamma trunc y0 y1 yn").split()
#: intrinsics of values only: fast approximations, rounding-mode arithmetic, conversions and bit operations
_INTRINSICS = ("__expf __exp10f __logf __log2f __log10f __sinf __cosf __tanf __powf __fdividef __saturatef __frcp_rn "
               "__fsqrt_rn __frsqrt_rn __fadd_rn __fadd_rz __fsub_rn __fmul_rn __fmul_rz __fdiv_rn __fmaf_rn __dadd_rn "
               "__dmul_rn __ddiv_rn __fma_rn __drcp_rn __dsqrt_rn __int_as_float __float_as_int __uint_as_float "
               "__float_as_uint __longlong_as_double __double_as_longlong __float2int_rn __float2int_rz __float2int_rd "
               "__float2int_ru __float2uint_rn __float2uint_rz __int2float_rn __uint2float_rn __double2float_rn "
               "__double2int_rn __double2int_rz __int2double_rn __float2ll_rn __ll2float_rn __float2half __half2float "
               "__popc __popcll __clz __clzll __ffs __ffsll __brev __brevll __mulhi __umulhi __mul64hi __umul64hi "
               "__mul24 __umul24 __sad __usad __byte_perm __funnelshift_l __funnelshift_r __hadd __rhadd __uhadd "
               "__urhadd").split()
#: cuda_fp16.h and cuda_bf16.h: half and bfloat16 values made, converted and computed on (no pointer argument)
_HALF = ("__half __half2 half half2 __nv_bfloat16 __nv_bfloat162 nv_bfloat16 nv_bfloat162 __float2half __float2half_rn "
         "__half2float __float2bfloat16 __float2bfloat16_rn __bfloat162float __floats2half2_rn __float22half2_rn "
         "__half22float2 __floats2bfloat162_rn __float22bfloat162_rn __bfloat1622float2 __float2half2_rn "
         "__float2bfloat162_rn __low2float __high2float __low2half __high2half __low2bfloat16 __high2bfloat16 "
         "__halves2half2 __halves2bfloat162 __lows2half2 __highs2half2 __hadd __hsub __hmul __hdiv __hfma __hneg "
         "__habs __hadd2 __hsub2 __hmul2 __h2div __hfma2 __hneg2 __habs2 __hmax __hmin __hmax2 __hmin2 __heq __hne "
         "__hlt __hgt __hle __hge hsqrt hrsqrt hrcp hexp hlog hsin hcos h2sqrt h2rsqrt h2rcp h2exp h2log").split()
PURE_CALLS = {"min", "max", "umin", "umax", "llmin", "llmax", "ullmin", "ullmax", "abs", "labs", "llabs", "__ldg",
              "static_cast", "isnan", "isinf", "isfinite", "signbit", *_MATH, *(f"{m}f" for m in _MATH),
              *_INTRINSICS, *_HALF}
_STRIDE = re.compile(r"^\(?\s*(?:blockDim\.x\s*\*\s*gridDim\.x|gridDim\.x\s*\*\s*blockDim\.x)\s*\)?$")


def squash(s: str) -> str:
    return " ".join(s.split())


#: an integer cast of one of the index's parts: the value is the same for every thread of a launch of fewer than 2^31
_CAST = re.compile(r"\(\s*(?:(?:unsigned|signed)\s+)?(?:long\s+long|long|int|size_t|std::size_t|u?int(?:32|64)_t|"
                   r"ptrdiff_t|unsigned)(?:\s+int)?\s*\)\s*(?=(?:blockIdx|blockDim|threadIdx|gridDim)\.x\b)")
_STATIC_CAST = re.compile(r"static_cast\s*<\s*(?:(?:unsigned|signed)\s+)?(?:long\s+long|long|int|size_t|std::size_t|"
                          r"u?int(?:32|64)_t|unsigned)(?:\s+int)?\s*>\s*\(\s*((?:blockIdx|blockDim|threadIdx|gridDim)\.x)\s*\)")


def without_int_casts(text: str) -> str:
    """`text` with integer casts of the thread geometry's x parts taken off (`(size_t)blockIdx.x` and
    `static_cast<long>(gridDim.x)` read as `blockIdx.x`, `gridDim.x`): the same value for every thread of a launch
    of fewer than 2^31 threads, so an index or stride spelled with them is matched as the plain one; a rewrite that
    matched it copies the original text, casts and all, wherever it writes it."""
    return _STATIC_CAST.sub(r"\1", _CAST.sub("", text))


def is_grid_stride(text: str) -> bool:
    return bool(_STRIDE.match(squash(text)))


@dataclass
class Loop:
    cursor: object
    var: str
    lo: str
    hi: str
    step: str          # "1" or the stride expression
    body: object       # the statement
    has_decl: bool     # `for (int j = ...)`
    ctype: str = "int"  # the counter's declared type (`size_t` of `for (size_t j = ...)`)


def canonical_loop(src, c) -> Loop:
    """`for (int v = lo; v < hi; ++v | v++ | v += s)`; Refused otherwise."""
    if kind(c) != "FOR_STMT":
        raise Refused("not a for loop")
    kids = list(c.get_children())
    if len(kids) != 4:
        raise Refused("a for loop without init, condition or increment")
    init, cond, inc, body = kids
    if kind(init) == "DECL_STMT":
        decls = list(init.get_children())
        if len(decls) != 1 or not list(decls[0].get_children()):
            raise Refused("a loop that declares several variables")
        var, lo_c = decls[0].spelling, list(decls[0].get_children())[-1]
        has_decl = True
    else:
        raise Refused("a loop whose counter is declared outside it")
    if kind(cond) != "BINARY_OPERATOR" or src.operator(cond) != "<":
        raise Refused(f"a loop condition other than `{var} < bound`: `{src.src(cond)}`")
    left, right = list(cond.get_children())
    if squash(src.src(left)) != var:
        raise Refused(f"a loop condition other than `{var} < bound`")
    inc_text = squash(src.src(inc))
    if inc_text in (f"++{var}", f"{var}++", f"{var} += 1", f"{var}+=1"):
        step = "1"
    elif kind(inc) == "COMPOUND_ASSIGNMENT_OPERATOR" and src.operator(inc) == "+=" and \
            squash(src.src(list(inc.get_children())[0])) == var:
        step = src.src(list(inc.get_children())[1])
    else:
        raise Refused(f"a loop increment other than ++{var} or {var} += stride: `{inc_text}`")
    if var in src.refs(right):
        raise Refused("a loop bound that depends on the loop counter")
    for w in src.writes(body):
        target = list(w.get_children())[0] if list(w.get_children()) else w
        if var in src.refs(target) and squash(src.src(target)) == var:
            raise Refused(f"the loop body assigns its counter {var}")
    return Loop(c, var, src.src(lo_c), src.src(right), step, body, has_decl, _counter_type(init))


def _counter_type(init) -> str:
    """The loop counter's type as declared (`size_t`, `long`), `int` where the declaration gives none usable."""
    decl = list(init.get_children())[0]
    spelled = decl.type.spelling
    return spelled if spelled and "type-parameter" not in spelled and not decl.type.get_canonical().spelling.startswith(
        ("const ", "volatile ")) else "int"


def size_expr(src, spec, text: str) -> str | None:
    """`text` (a bound as the kernel writes it) as an expression over mep.yaml's sizes: a scalar parameter's
    value, the text itself, or its macro expansion (`ROWS` -> `NR`; `ROWS_P` -> `nr` -> nr's value); None when
    it has no value for the MEP's sizes."""
    for t in dict.fromkeys((squash(text), src.expand(text))):
        try:
            p = spec.param(t)
            if p.role == "scalar" and p.value and spec.size(p.value) is not None:
                return p.value
            continue
        except KeyError:
            pass
        if spec.size(t) is not None:
            return t
    arg = src.template_values().get(squash(text))
    if arg is not None and spec.size(arg) is not None:      # a non-type template parameter: its launch argument
        return arg
    return None


def bound_value(src, spec, text: str) -> int | None:
    """The value of `text` (a bound as the kernel writes it) for the MEP: size_expr's expression, else the text
    with kernel.cu's macros expanded and each scalar parameter replaced by its value; None without one."""
    e = size_expr(src, spec, text)
    if e is not None:
        return spec.size(e)
    out = src.expand(text)
    for p in spec.params:
        if p.role == "scalar" and p.value is not None:
            out = re.sub(rf"(?<![\w.]){re.escape(p.name)}(?![\w.])", f"({p.value})", out)
    return spec.size(out)


def body_statements(c) -> list:
    """The statements of a compound statement, or the single statement itself."""
    return list(c.get_children()) if kind(c) == "COMPOUND_STMT" else [c]


#: the element types whose arithmetic operators are CUDA's own value operators (cuda_fp16.h, cuda_bf16.h) or built in
NUMERIC_TYPES = {"float", "double", "int", "unsigned", "unsigned int", "long", "long long", "short", "__half", "half",
                 "__nv_bfloat16", "nv_bfloat16", "char", "signed char", "unsigned char", "unsigned short",
                 "unsigned long", "unsigned long long", "bool", "size_t", "int8_t", "uint8_t", "int16_t", "uint16_t",
                 "int32_t", "uint32_t", "int64_t", "uint64_t"}
ARITHMETIC_OPERATORS = {"operator+", "operator-", "operator*", "operator/"}


def _value_operator(src, call) -> bool:
    """`a * b` in a template where the element type is a parameter: libclang shows a call of `operator*` (the
    overloads of cuda_fp16.h are visible). It is plain arithmetic where every template argument the MEP launches the
    kernel with is a numeric type (`matrix_mul<__half>`)."""
    names = {k.spelling for k in walk(call) if kind(k) in ("OVERLOADED_DECL_REF", "DECL_REF_EXPR")}
    return bool(names & ARITHMETIC_OPERATORS) and len(list(call.get_children())) <= 3 and _numeric_launch(src)


def _numeric_launch(src) -> bool:
    """Whether every template argument the MEP launches the kernel with is a number type or an integer."""
    args = [str(a).strip() for a in src.spec.kernel.template_args]
    return bool(args) and all(a in NUMERIC_TYPES or a.lstrip("-").isdigit() for a in args)


def _value_cast(src, call) -> bool:
    """`T(x)` in a template where T is a type parameter: libclang shows an unresolved call with T's name first. It
    converts a number where every template argument the MEP launches the kernel with is a numeric type
    (`resize<unsigned char, 8>`)."""
    kids = list(call.get_children())
    if call.spelling or not kids or kind(kids[0]) != "TYPE_REF" or len(kids) > 2:
        return False
    ref = kids[0].referenced
    return ref is not None and kind(ref) == "TEMPLATE_TYPE_PARAMETER" and _numeric_launch(src)


#: CUDA's built-in vector types (vector_types.h: float2, int4, double2...): plain structs of numbers
VECTOR_TYPE = re.compile(r"(?:u?char|u?short|u?int|u?long|u?longlong|float|double)[1-4]")
#: their constructors (vector_functions.h: make_float2...): a value from numbers, nothing else
_VECTOR_MAKE = re.compile(r"make_" + VECTOR_TYPE.pattern)


def vector_store(src, call) -> bool:
    """Whether `call` is `target = value` on a CUDA built-in vector type: libclang shows the struct's implicit copy
    assignment as a call of `operator=`, and it stores the members, nothing else (the write is the caller's to
    count: vector_loads reads it as a store to its target)."""
    kids = list(call.get_children())
    if kind(call) != "CALL_EXPR" or call.spelling != "operator=" or not kids:
        return False
    spelled = kids[0].type.get_canonical().spelling.replace("const ", "").replace("volatile ", "").strip()
    return bool(VECTOR_TYPE.fullmatch(spelled.split("::")[-1].removeprefix("struct ")))


def pure_call(src, call, extra=frozenset()) -> bool:
    """Whether a call cannot have side effects: a math function of PURE_CALLS (or of `extra`), a CUDA vector type's
    constructor or copy (`float2(...)`, `make_float2(...)`: members from numbers), arithmetic on numbers through an
    operator in a template (_value_operator) or a number's conversion to a type parameter (_value_cast), or a
    function of kernel.cu that is pure (pure_function). The one
    test every analysis asks, so that none is stricter or looser than another about the same call."""
    name = call.spelling
    return (name in PURE_CALLS and not _defined_here(src, call)) or name in extra \
        or bool(VECTOR_TYPE.fullmatch(name) or _VECTOR_MAKE.fullmatch(name)) \
        or _member_copy(call) or _value_operator(src, call) or _value_cast(src, call) or pure_function(src, call)


def _defined_here(src, call) -> bool:
    """Whether the function called is kernel.cu's own (an application's `round` or `max` is no math library's:
    pure_function judges it by its body)."""
    ref = call.referenced
    return ref is not None and ref.location.file is not None and ref.location.file.name == src.path


def _member_copy(call) -> bool:
    """A copy or move of a value by the constructor the compiler writes (`Params q = p;` of a plain struct):
    member by member, reading the source and nothing else."""
    ref = call.referenced
    return ref is not None and kind(ref) == "CONSTRUCTOR" and (ref.is_copy_constructor() or ref.is_move_constructor()) \
        and ref.is_default_method()


def check_pure(src, expr, what: str) -> None:
    """Refuse when `expr` writes anything or calls a function that may have side effects."""
    if src.writes(expr):
        raise Refused(f"{what} assigns inside an expression: `{squash(src.src(expr))[:60]}`")
    for c in walk(expr):
        if kind(c) == "CALL_EXPR" and not pure_call(src, c):
            raise Refused(f"{what} calls `{c.spelling or squash(src.src(c))[:40]}`, which may have side effects")


def pure_function(src, call, depth: int = 0) -> bool:
    """Whether `call` calls a function defined in kernel.cu that cannot have side effects: no parameter through
    which it could write (a pointer or reference to non-const), every assignment in its body to one of its own
    locals, and every call in it pure in turn (the example's `bin_index`, `clamp_val<int>`, `lap5`)."""
    ref = call.referenced
    fn = (ref.get_definition() or ref) if ref is not None else None
    if fn is None or kind(fn) not in ("FUNCTION_DECL", "FUNCTION_TEMPLATE") or depth > 4 or \
            fn.location.file is None or fn.location.file.name != src.path:
        return False
    start, end = src.span(fn)
    for prm in fn.get_children():
        if kind(prm) != "PARM_DECL":
            continue
        ty = prm.type.get_canonical()
        if ty.kind.name in ("POINTER", "LVALUEREFERENCE", "RVALUEREFERENCE") and \
                not ty.get_pointee().is_const_qualified():
            return False
    body = next((k for k in fn.get_children() if kind(k) == "COMPOUND_STMT"), None)
    if body is None:
        return False
    for w in src.writes(body):
        kids = list(w.get_children())
        target = strip(kids[0]) if kids else None
        decl = target.referenced if target is not None and kind(target) == "DECL_REF_EXPR" else None
        if decl is None or kind(decl) != "VAR_DECL" or not start <= decl.extent.start.offset < end:
            return False
    for c in walk(body):
        if kind(c) in ("GCC_ASM_STMT", "MS_ASM_STMT"):
            return False
        if kind(c) == "CALL_EXPR" and c.spelling not in PURE_CALLS and not VECTOR_TYPE.fullmatch(c.spelling) and \
                not _VECTOR_MAKE.fullmatch(c.spelling) and not _member_copy(c) and not pure_function(src, c, depth + 1):
            return False
    return True


def array_accesses(src, expr) -> list[tuple[str, object]]:
    """(base pointer name, index cursor) of every `p[i]` in `expr`."""
    out = []
    for c in walk(expr):
        if kind(c) == "ARRAY_SUBSCRIPT_EXPR":
            base, index = list(c.get_children())
            out.append((squash(src.src(base)), index))
    return out


def unit_stride_in(src, index, var: str) -> bool:
    """True when `var` appears in `index` only as an added term (coefficient 1): `row * n + j`, `j`, `j + k`."""
    def terms(c):
        c = strip(c)
        if kind(c) == "BINARY_OPERATOR" and src.operator(c) in ("+", "-"):
            left, right = list(c.get_children())
            return terms(left) + terms(right)
        return [c]
    found = False
    for t in terms(index):
        refs = src.refs(t)
        if var not in refs:
            continue
        if squash(src.src(t)) != var:
            return False
        found = True
    return found


def thread_index_var(src) -> tuple[str, object]:
    """The one `const int v = blockIdx.x * blockDim.x + threadIdx.x;` declared at the top of the body."""
    for stmt in body_statements(src.body):
        if kind(stmt) != "DECL_STMT":
            continue
        decls = list(stmt.get_children())
        if len(decls) == 1 and kind(decls[0]) == "VAR_DECL":
            init = list(decls[0].get_children())
            if init and is_global_index(src.src(init[-1])):
                return decls[0].spelling, stmt
    for d in (c for c in walk(src.body) if kind(c) == "VAR_DECL"):
        init = [k for k in d.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
        why = why_not(src, init[-1])[1] if init else None
        if why:         # the index's shape, with a part that is not provably the library's spelling
            raise Refused(f"the thread index `{d.spelling}` is not provably `blockIdx.x * blockDim.x + "
                          f"threadIdx.x`: {why}")
    raise Refused("no `blockIdx.x * blockDim.x + threadIdx.x` thread index declared at the top of the kernel")


def uses_block_geometry(src, skip=()) -> list[str]:
    """Uses of threadIdx/blockIdx/blockDim/gridDim outside the statements in `skip`."""
    skipped = set()
    for s in skip:
        skipped |= {(n.extent.start.offset, n.extent.end.offset) for n in walk(s)}
    return [src.src(c) for c in walk(src.body) if kind(c) == "MEMBER_REF_EXPR" and
            (c.extent.start.offset, c.extent.end.offset) not in skipped and
            src.src(c).split(".")[0] in ("threadIdx", "blockIdx", "blockDim", "gridDim")]


@dataclass
class GuardedThread:
    """`v = blockIdx.x*blockDim.x + threadIdx.x; if (v < BOUND) {...}`: one thread per row or element."""
    var: str
    decl: object           # the declaration statement of `var`
    guard: object          # the IF_STMT
    then: object           # its body
    bound: str             # BOUND as written


def guarded_thread(src, what: str, barrier_reason: str) -> GuardedThread:
    """The kernel as exactly a thread index and one guard around the work, with no shared memory, barrier,
    early return or block geometry beyond the index (`what` names the index in the reasons: "row", "thread";
    `barrier_reason` says why an early return is unsafe for the rewrite that asks)."""
    var, decl = thread_index_var(src)
    rest = [s for s in body_statements(src.body) if s is not decl and src.span(s) != src.span(decl)]
    if len(rest) != 1 or kind(rest[0]) != "IF_STMT":
        raise Refused(f"the kernel is not `{var} = global index; if ({var} < bound) {{...}}`")
    kids = list(rest[0].get_children())
    if len(kids) != 2:
        raise Refused(f"the {what} guard has an else branch")
    cond, then = kids
    if kind(cond) != "BINARY_OPERATOR" or src.operator(cond) != "<" or \
            squash(src.src(list(cond.get_children())[0])) != var:
        raise Refused(f"the {what} guard is not `{var} < bound`")
    if "__syncthreads" in src.calls() or src.shared_arrays():
        raise Refused("the kernel uses shared memory or barriers")
    if src.nodes("RETURN_STMT"):
        raise Refused(f"the kernel returns early ({barrier_reason})")
    geometry = uses_block_geometry(src, skip=[decl])
    if geometry:
        raise Refused(f"the kernel uses {geometry[0]} beyond its {what} index")
    return GuardedThread(var, decl, rest[0], then, src.src(list(cond.get_children())[1]))


def element_type(decl_type: str) -> str:
    """The element type a pointer parameter's declared type points to (`const float* __restrict__` -> float)."""
    t = re.sub(r"\b(const|__restrict__|restrict|volatile)\b", " ", decl_type).replace("*", " ")
    return " ".join(t.split())


def array_stores(src, block) -> list[tuple]:
    """The statements of `block` (a compound statement) that are `p[index] = value;` with p a pointer parameter, as
    (the `p[index]` target, p, p's element type); and whether p is used nowhere else in the kernel is
    `only_use(src, p)`."""
    out = []
    for stmt in body_statements(block):
        if kind(stmt) != "BINARY_OPERATOR" or src.operator(stmt) != "=":
            continue
        lhs = list(stmt.get_children())[0]
        if kind(lhs) != "ARRAY_SUBSCRIPT_EXPR":
            continue
        name = squash(src.src(list(lhs.get_children())[0]))
        p = src.param(name)
        if p is not None and p.pointer:
            out.append((lhs, name, element_type(p.type)))
    return out


def only_use(src, name: str) -> bool:
    """`name` is referred to exactly once in the kernel's body."""
    return sum(1 for c in walk(src.body) if kind(c) == "DECL_REF_EXPR" and c.spelling == name) == 1


#: calls whose result depends on which threads form a warp
WARP_LEVEL = ("__shfl", "__ballot", "__any", "__all", "__activemask", "__syncwarp", "__match", "__reduce_",
              "tiled_partition", "this_thread_block", "coalesced_threads")


def warp_level(src) -> list[str]:
    """What in the kernel depends on which threads form a warp: warp-level calls, `warpSize`, `volatile` (the
    warp-synchronous idiom); a rewrite that changes the block's shape must refuse where this is not empty."""
    body = src.src(src.body)
    return sorted({c for c in src.calls() if c.startswith(WARP_LEVEL)} |
                  ({"warpSize"} if re.search(r"\bwarpSize\b", body) else set()) |
                  ({"volatile"} if re.search(r"\bvolatile\b", body) else set()))
