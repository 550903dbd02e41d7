"""What the inventory records of one `__global__` kernel: signature, attributes, shared memory, features."""
from __future__ import annotations

import re

from ..parsing import clang
from .source import SourceFiles, extent_json, qualified_name, split_top_level

LOOP_KINDS = ("FOR_STMT", "WHILE_STMT", "DO_STMT", "CXX_FOR_RANGE_STMT")
FUNCTION_KINDS = ("FUNCTION_DECL", "FUNCTION_TEMPLATE", "CXX_METHOD")


def has_attr(cursor, kind_name: str) -> bool:
    return any(c.kind.name == kind_name for c in cursor.get_children())


def is_kernel(cursor) -> bool:
    return cursor.kind.name in FUNCTION_KINDS and has_attr(cursor, "CUDAGLOBAL_ATTR")


def is_device_function(cursor) -> bool:
    return cursor.kind.name in FUNCTION_KINDS and has_attr(cursor, "CUDADEVICE_ATTR")


def _strip_qualifiers(spelling: str) -> str:
    s = re.sub(r"\b(const|volatile|__restrict|__restrict__|restrict)\b", " ", spelling)
    return " ".join(s.split())


def param_json(parm, src: SourceFiles) -> dict:
    t = parm.type
    kind = t.kind.name
    is_pointer = kind == "POINTER" or (kind in ("INCOMPLETEARRAY", "CONSTANTARRAY"))
    entry = {
        "name": parm.spelling,
        "type": t.spelling,
        "is_pointer": is_pointer,
        "is_reference": kind in ("LVALUEREFERENCE", "RVALUEREFERENCE"),
        "is_const": False,
        "is_restrict": t.is_restrict_qualified() or "__restrict" in t.spelling,
        "pointee_type": None,
        "written": src.cursor_text(parm),
    }
    if is_pointer:
        pointee = t.get_pointee() if kind == "POINTER" else t.element_type
        entry["is_const"] = pointee.is_const_qualified()
        entry["pointee_type"] = _strip_qualifiers(pointee.spelling)
    else:
        entry["is_const"] = t.is_const_qualified()
        decl = t.get_canonical().get_declaration()
        if decl is not None and decl.kind.name in ("STRUCT_DECL", "CLASS_DECL", "UNION_DECL"):
            entry["struct"] = qualified_name(decl)
        elif decl is not None and decl.kind.name == "ENUM_DECL":
            entry["enum"] = qualified_name(decl)
    return entry


def template_params(cursor) -> list[dict]:
    out = []
    for c in cursor.get_children():
        if c.kind.name == "TEMPLATE_TYPE_PARAMETER":
            out.append({"kind": "type", "name": c.spelling})
        elif c.kind.name == "TEMPLATE_NON_TYPE_PARAMETER":
            out.append({"kind": "non_type", "name": c.spelling, "type": c.type.spelling})
        elif c.kind.name == "TEMPLATE_TEMPLATE_PARAMETER":
            out.append({"kind": "template", "name": c.spelling})
    return out


_ATTR_RE = re.compile(r"(__launch_bounds__|__cluster_dims__|__maxnreg__)\s*\((.*)\)\s*$", re.S)


def attributes(cursor, src: SourceFiles) -> dict:
    """__launch_bounds__ (and __cluster_dims__) with their arguments as written."""
    attrs: dict = {}
    for c in cursor.get_children():
        if c.kind.name != "UNEXPOSED_ATTR":
            continue
        m = _ATTR_RE.match(src.cursor_text(c).strip())
        if m:
            attrs[m.group(1).strip("_")] = split_top_level(m.group(2))
    return attrs


def _walk(cursor):
    return clang.walk(cursor)


def is_loop(cursor) -> bool:
    """A loop statement, except `do { ... } while (0)`, the macro idiom (CUDA_CHECK) that runs once."""
    if cursor.kind.name not in LOOP_KINDS:
        return False
    if cursor.kind.name == "DO_STMT":
        cond = list(cursor.get_children())[-1:]
        while cond and cond[0].kind.name == "UNEXPOSED_EXPR":
            cond = list(cond[0].get_children())[:1]
        if cond and cond[0].kind.name in ("INTEGER_LITERAL", "CXX_BOOL_LITERAL_EXPR"):
            first = next(iter(cursor.get_tokens()), None)
            spelled_in_macro = first is None or first.spelling != "do"
            if spelled_in_macro or [t.spelling for t in cond[0].get_tokens()] in (["0"], ["false"]):
                return False
    return True


def loop_depth(cursor) -> int:
    """The deepest nesting of loops under the cursor (iterative: expressions nest deeper than Python recurses)."""
    best, stack = 0, [(cursor, 0)]
    while stack:
        c, above = stack.pop()
        here = above + (1 if is_loop(c) else 0)
        best = max(best, here)
        stack.extend((ch, here) for ch in c.get_children())
    return best


_SHUFFLE = re.compile(r"^__(shfl|ballot|any|all|reduce_\w+)_sync$")
_TEXTURE = re.compile(r"^(tex1D|tex2D|tex3D|tex1Dfetch|texCubemap|surf[123]D)\w*$")


def body_facts(cursor, src: SourceFiles) -> tuple[dict, list[str]]:
    """Shared memory declarations and the features that matter for reproducing or optimizing it."""
    shared = {"static": [], "dynamic": []}
    features: set[str] = set()
    for c in _walk(cursor):
        k = c.kind.name
        if k == "VAR_DECL" and has_attr(c, "CUDASHARED_ATTR"):
            entry = {"name": c.spelling, "type": c.type.spelling, "written": src.cursor_text(c)}
            if c.storage_class.name == "EXTERN" or c.type.kind.name == "INCOMPLETEARRAY":
                shared["dynamic"].append(entry)
            else:
                size = c.type.get_size()
                entry["size_bytes"] = size if size > 0 else None
                shared["static"].append(entry)
        elif k == "CALL_EXPR":
            name = c.spelling
            if name.startswith("atomic"):
                features.add("atomics")
            elif _SHUFFLE.match(name):
                features.add("warp_intrinsics")
            elif _TEXTURE.match(name):
                features.add("texture")
            elif name == "__syncthreads":
                features.add("block_sync")
            elif name in ("sync", "grid_group", "this_grid"):
                features.add("cooperative_groups")
            if any(ch.kind.name == "CALL_EXPR" and ch.spelling == "__cudaPushCallConfiguration"
                   for ch in c.get_children()):
                features.add("dynamic_parallelism")
        elif k == "TYPE_REF" and ("cudaTextureObject_t" in c.spelling or "cudaSurfaceObject_t" in c.spelling
                                  or c.spelling.startswith(("texture<", "surface<"))):
            features.add("texture")
        elif k == "NAMESPACE_REF" and c.spelling == "cooperative_groups":
            features.add("cooperative_groups")
    if shared["static"] or shared["dynamic"]:
        features.add("shared_memory")
    return shared, sorted(features)


def kernel_json(cursor, src: SourceFiles) -> dict:
    body = next((c for c in cursor.get_children() if c.kind.name == "COMPOUND_STMT"), None)
    shared, features = body_facts(body, src) if body is not None else ({"static": [], "dynamic": []}, [])
    for p in cursor.get_children():
        if p.kind.name == "PARM_DECL" and any(s in p.type.spelling for s in ("cudaTextureObject_t", "cudaSurfaceObject_t")):
            features = sorted(set(features) | {"texture"})
    extent = extent_json(cursor, src)
    # the signature is everything before the body, as written
    sig_end = body.extent.start.offset if body is not None else cursor.extent.end.offset
    signature = src.text(cursor.extent.start.file.name, cursor.extent.start.offset, sig_end).strip()
    return {
        "name": cursor.spelling,
        "qualified_name": qualified_name(cursor),
        "usr": cursor.get_usr(),
        **extent,
        "signature": signature,
        "is_template": cursor.kind.name == "FUNCTION_TEMPLATE",
        "template_params": template_params(cursor),
        "params": [param_json(p, src) for p in cursor.get_children() if p.kind.name == "PARM_DECL"],
        "attributes": attributes(cursor, src),
        "shared_memory": shared,
        "features": features,
        "loop_depth": loop_depth(body) if body is not None else 0,
    }
