"""`fp(2.0)` inside `template <typename fp> void run()`: a value constructed from the enclosing function
template's own type parameter, spelled with the type the application instantiates the template with
(`__half(2.0)`), so the compiler converts it as the application's instantiation does. Only a parameter the
instantiation gives (targs.enclosing_instantiation) is replaced; its note joins the MEP's notes."""
from __future__ import annotations
from .targs import enclosing_instantiation


def template_cast(r, c) -> str | None:
    """The text of `T(args)` (a CALL_EXPR whose callee is a TYPE_REF to a type parameter of the function
    template being looked into), or None."""
    kids = list(c.get_children())
    fn = r.scope[-1] if r.scope else None
    if not kids or kids[0].kind.name != "TYPE_REF" or fn is None or fn.kind.name != "FUNCTION_TEMPLATE":
        return None
    ref = kids[0].referenced
    if ref is None or ref.kind.name != "TEMPLATE_TYPE_PARAMETER" or ref.semantic_parent is None \
            or ref.semantic_parent.get_usr() != fn.get_usr():
        return None
    mapping, note = enclosing_instantiation(r.p, fn, resolver=r)
    typ = mapping.get(ref.spelling)
    if typ is None:
        return None
    vals = [r.expr(a) for a in kids[1:]]
    if None in vals:
        return None
    if note and note not in r.choices:
        r.choices.append(note)
    return f"{typ}(" + ", ".join(vals) + ")"
