"""Launch sites: `kernel<<<grid, block, smem, stream>>>(args)` and `cudaLaunchKernel(kernel, ...)`.

Each site keeps every expression as written, the function it sits in, and how deep in loops it is.
"""
from __future__ import annotations

import re

from ..parsing import clang
from ..parsing.clang import specialized_template
from .kernels import FUNCTION_KINDS, is_kernel, is_loop
from .loop_changes import loop_changes
from .source import SourceFiles, qualified_name, split_top_level

_IDENT = re.compile(r"[A-Za-z_]\w*")
LAUNCH_APIS = {"cudaLaunchKernel": "cudaLaunchKernel", "cudaLaunchCooperativeKernel": "cudaLaunchCooperativeKernel",
               "cudaLaunchKernelExC": "cudaLaunchKernelExC"}


def _overloaded(cursor) -> list:
    """The declarations an OVERLOADED_DECL_REF stands for: in a template, `k<3, T><<<...>>>` names the
    kernel template through an unresolved lookup, which libclang exposes as a set of overloads."""
    lib = clang.cindex().conf.lib
    try:
        n = lib.clang_getNumOverloadedDecls(cursor)
        return [lib.clang_getOverloadedDecl(cursor, i) for i in range(n)]
    except Exception:  # an older binding without these entry points
        return []


def _kernel_of(ref):
    """The kernel a referenced declaration is (its primary template for a specialisation), else None."""
    if ref is None:
        return None
    tmpl = specialized_template(ref) if ref.kind.name == "FUNCTION_DECL" else None
    for cand in (tmpl, ref):
        if cand is not None and is_kernel(cand):
            return cand
    # a template specialisation's primary is reachable through canonical
    if ref.canonical is not None and is_kernel(ref.canonical):
        return ref.canonical
    return None


def _kernels_in_initializer(var) -> list:
    """Kernels a function-pointer variable or table is initialized with: `kfn table[] = {k1, k2};`."""
    out = []
    for c in _walk(var):
        if c.kind.name == "DECL_REF_EXPR":
            k = _kernel_of(c.referenced)
            if k is not None and all(k != o for o in out):
                out.append(k)
    return out


def _walk(cursor):
    return clang.walk(cursor)


def _referenced_kernels(cursor) -> list[tuple]:
    """The __global__ function(s) a callee or function-pointer expression names, each with the reference
    that names it: one for a kernel named directly (also through the unresolved lookup of a template), every
    kernel of the initializer for a function pointer or a table of them (`table[i]<<<...>>>`, the reference
    then being None: the launch runs one of them)."""
    stack = [cursor]
    while stack:
        c = stack.pop()
        if c.kind.name in ("DECL_REF_EXPR", "OVERLOADED_DECL_REF"):
            ref = c.referenced
            if ref is not None and ref.kind.name == "OVERLOADED_DECL_REF" or \
                    ref is None and c.kind.name == "OVERLOADED_DECL_REF":
                for decl in _overloaded(c if c.kind.name == "OVERLOADED_DECL_REF" else ref):
                    k = _kernel_of(decl)
                    if k is not None:
                        return [(k, None)]
            k = _kernel_of(ref)
            if k is not None:
                return [(k, c)]
            if ref is not None and ref.kind.name == "VAR_DECL" and \
                    "(*" in ref.type.get_canonical().spelling:
                return [(k, None) for k in _kernels_in_initializer(ref)]
        stack.extend(reversed(list(c.get_children())))
    return []


def _template_args(callee_text: str) -> list[str] | None:
    """`ns::k<float, 128>` -> ['float', '128']; None when the call names no template arguments."""
    lt = callee_text.find("<")
    if lt < 0 or not callee_text.rstrip().endswith(">"):
        return None
    return split_top_level(callee_text[lt + 1:callee_text.rstrip().rfind(">")])


def local_init(var, src: SourceFiles) -> str | None:
    """`dim3 grid(a, b)` -> 'dim3(a, b)'; `const int blocks = e;` -> 'e' (as written)."""
    text = src.cursor_text(var)
    name = var.spelling
    m = re.search(rf"\b{re.escape(name)}\b", text)
    if m is None:
        return None
    rest = text[m.end():].strip()
    if rest.startswith("="):
        return rest[1:].strip()
    if rest.startswith(("(", "{")):
        type_name = var.type.spelling.replace("const ", "").strip()
        return f"{type_name}{rest[0]}{rest[1:-1].strip()}{')' if rest[0] == '(' else '}'}"
    return None


def _site(call, kernel, kind: str, config: list[str], args: list[str], targs, ctx, src: SourceFiles) -> dict:
    names = ("grid", "block", "shared_mem", "stream")
    cfg = {n: (config[i] if i < len(config) and config[i] != "" else None) for i, n in enumerate(names)}
    used = set()
    for text in [*cfg.values(), *args]:
        used |= set(_IDENT.findall(text or ""))
    local_inits = {n: ctx["locals"][n] for n in sorted(used) if n in ctx["locals"]}
    changing = set().union(*(_changed_in(lp, ctx.get("changed", {})) for lp in ctx.get("loop_nodes", ())))
    varies = {n: sorted(set(_IDENT.findall(cfg[n] or "")) & changing) for n in ("grid", "block", "shared_mem")}
    loc = call.extent.start
    file, start, end = src.span(call) or (loc.file.name, call.extent.start.offset, call.extent.end.offset)
    return {
        "kernel_usr": kernel.get_usr(),
        "kernel": qualified_name(kernel),
        "kind": kind,
        "file": src.rel(loc.file.name),
        "line": loc.line,
        "column": loc.column,
        "start_byte": start,
        "end_byte": end,
        "text": src.cursor_text(call),
        **cfg,
        "template_args": targs,
        "args": args,
        "enclosing_function": ctx["function"],
        "enclosing_usr": ctx["usr"],
        "enclosing_params": ctx["params"],
        "locals": local_inits,
        "in_loop": ctx["loops"] > 0,
        "loop_depth": ctx["loops"],
        # names of the grid, block or shared memory that a loop around the launch changes (a loop over block sizes):
        # the launch differs from one round to the next
        **({"varies": {n: v for n, v in varies.items() if v}} if any(varies.values()) else {}),
    }


def _changed_in(loop, memo: dict) -> set[str]:
    """Names a loop may change from one round to the next (`loop_changes`); `memo`: per translation unit, by the
    loop's place."""
    key = (loop.extent.start.file.name if loop.extent.start.file else "", loop.extent.start.offset,
           loop.extent.end.offset)
    if key not in memo:
        memo[key] = loop_changes(loop)
    return memo[key]


def instantiation_types(specialization, kernel) -> list:
    """The record and enum declarations a launch instantiates a template kernel with: its template type
    arguments and the (pointee) types of its parameters in that specialization (`apply<<<...>>>(x, n,
    Scale{2.0f})` makes `F` = `Scale`). The kernel's own closure cannot see them: its body only names `F`."""
    if specialization is None or specialization == kernel or specialization.kind.name != "FUNCTION_DECL":
        return []
    types = []
    for i in range(max(0, specialization.get_num_template_arguments())):
        try:
            if specialization.get_template_argument_kind(i).name == "TYPE":
                types.append(specialization.get_template_argument_type(i))
        except ValueError:      # a kind the binding does not name (a pack, say): not a type mepgen copies
            continue
    types += [a.type for a in specialization.get_arguments()]
    out = []
    for t in types:
        t = t.get_canonical()
        while t.kind.name in ("POINTER", "LVALUEREFERENCE", "RVALUEREFERENCE"):
            t = t.get_pointee().get_canonical()
        decl = t.get_declaration()
        if decl is not None and decl.kind.name in ("STRUCT_DECL", "CLASS_DECL", "UNION_DECL", "ENUM_DECL",
                                                   "CLASS_TEMPLATE"):
            out.append(decl)
    return out


def _chevron_site(call, src: SourceFiles, ctx):
    children = list(call.get_children())
    config = next((c for c in children if c.kind.name == "CALL_EXPR"
                   and c.spelling in ("__cudaPushCallConfiguration", "cudaConfigureCall")), None)
    if config is None:
        return None
    kernels = _referenced_kernels(children[0])
    if not kernels:
        return []
    cfg_text = src.cursor_text(config).strip()
    if cfg_text.startswith("<<<") and cfg_text.endswith(">>>"):
        cfg_text = cfg_text[3:-3]
    call_span, cfg_span = src.span(call), src.span(config)
    if call_span is None or cfg_span is None:
        return []
    callee_text = src.text(call_span[0], call_span[1], cfg_span[1]).strip()
    callee_text = callee_text[:callee_text.rfind("<<<")].strip() if "<<<" in callee_text else callee_text
    after = [c for c in children[1:] if c != config and (src.span(c) or ("", -1, -1))[1] >= cfg_span[2]]
    args = [src.cursor_text(a) for a in after]
    sites = []
    for kernel, ref in kernels:
        site = _site(call, kernel, "triple_chevron", split_top_level(cfg_text), args,
                     _template_args(callee_text) if ref is not None or len(kernels) == 1 else None, ctx, src)
        site["_instantiation_types"] = instantiation_types(ref.referenced if ref is not None else None, kernel)
        if ref is None and not _names(callee_text, kernel.spelling):
            site["through"] = callee_text   # a function pointer or a table of them: this kernel is one it holds
        sites.append(site)
    return sites


def _names(text: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", text) is not None


def _api_site(call, src: SourceFiles, ctx):
    args = [c for c in call.get_arguments()]
    if not args:
        return None
    kernels = _referenced_kernels(args[0])
    texts = [src.cursor_text(a) for a in args]
    # cudaLaunchKernel(func, grid, block, args, smem, stream)
    config = [texts[1] if len(texts) > 1 else "", texts[2] if len(texts) > 2 else "",
              texts[4] if len(texts) > 4 else "", texts[5] if len(texts) > 5 else ""]
    sites = []
    for kernel, ref in kernels:
        ref_text = src.cursor_text(ref) if ref is not None else ""
        site = _site(call, kernel, LAUNCH_APIS[call.spelling], config, [texts[3]] if len(texts) > 3 else [],
                     _template_args(ref_text), ctx, src)
        site["function_expr"] = texts[0]
        if ref is None and not _names(texts[0], kernel.spelling):
            site["through"] = texts[0]
        sites.append(site)
    return sites


def find_launch_sites(tops: list, src: SourceFiles) -> tuple[list[dict], list[dict]]:
    """Every launch site in the application's files of one translation unit, and the host call edges.

    The call edges (caller, callee, loop depth of the call) let the ranking see that a launch inside a
    wrapper function runs in the time loop of the wrapper's caller.
    """
    sites: list[dict] = []
    calls: list[dict] = []

    def visit(c, ctx):
        k = c.kind.name
        if k in FUNCTION_KINDS or k in ("CONSTRUCTOR", "DESTRUCTOR", "LAMBDA_EXPR"):
            if k != "LAMBDA_EXPR":
                params = [p.spelling for p in c.get_children() if p.kind.name == "PARM_DECL"]
                ctx = {"function": qualified_name(c), "usr": c.get_usr(), "loops": 0, "params": params,
                       "locals": {}, "changed": ctx.get("changed", {})}
        elif k == "VAR_DECL" and ctx["function"] is not None:
            init = local_init(c, src)
            if init is not None:
                ctx["locals"][c.spelling] = init
        elif is_loop(c):
            ctx = {**ctx, "loops": ctx["loops"] + 1, "loop_nodes": (*ctx.get("loop_nodes", ()), c)}
        elif k == "CALL_EXPR" and ctx["function"] is not None:
            found = None
            if c.spelling in LAUNCH_APIS:
                found = _api_site(c, src, ctx)
            elif any(ch.kind.name == "CALL_EXPR" and ch.spelling in ("__cudaPushCallConfiguration", "cudaConfigureCall")
                     for ch in c.get_children()):
                found = _chevron_site(c, src, ctx)
            if found:
                sites.extend(found)
            else:
                ref = c.referenced
                if ref is not None and ref.location.file is not None and src.in_app(ref.location.file.name) \
                        and ref.kind.name in FUNCTION_KINDS:
                    calls.append({"caller_usr": ctx["usr"], "caller": ctx["function"], "callee_usr": ref.get_usr(),
                                  "callee": qualified_name(ref), "loop_depth": ctx["loops"],
                                  "file": src.rel(c.location.file.name), "line": c.location.line,
                                  "args": [src.cursor_text(a) for a in c.get_arguments()],
                                  "locals": {}})
                    used = set()
                    for text in calls[-1]["args"]:
                        used |= set(_IDENT.findall(text))
                    calls[-1]["locals"] = {n: ctx["locals"][n] for n in sorted(used) if n in ctx["locals"]}
                    tmpl = specialized_template(ref) if ref.kind.name == "FUNCTION_DECL" else None
                    if tmpl is not None and tmpl != ref:
                        # `run<PayoffPut>(...)`: the types a launch inside run<T>'s body may instantiate with
                        calls[-1]["_template_usr"] = tmpl.get_usr()
                        calls[-1]["_instantiation_types"] = instantiation_types(ref, tmpl)
        return ctx

    # iterative, in source order (a local's initializer is seen before a launch that names it)
    changed: dict = {}       # loop -> the names it changes (shared by the sites inside it)
    for top in tops:
        stack = [(top, {"function": None, "usr": None, "loops": 0, "params": [], "locals": {}, "changed": changed})]
        while stack:
            c, ctx = stack.pop()
            inner = visit(c, ctx)
            stack.extend((ch, inner) for ch in reversed(list(c.get_children())))
    return sites, calls
