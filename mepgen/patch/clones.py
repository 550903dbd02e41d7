"""A winner that changed a device helper the application shares (an unrolled loop inside `vdot`, say) keeps its
change without touching the helper the rest of the application calls: the changed helper gets a copy of its own
under a new name (`vdot_for_render`), inserted beside the kernel like any new helper, and the new kernel calls the
copy. A shared helper that the variant left unchanged but that calls a copied one is copied too, so the change
reaches the kernel by every path. A changed helper the new kernel never reaches is left out: its change could not
have made the kernel faster.

Refused, with the reason: an operator or a helper with overloads of the same name (a call cannot be renamed
without knowing which one it reaches), a helper outside the kernel's namespace, and a call the renaming cannot
reach (spelled with a qualifier, `ns::vdot(...)`).
"""
from __future__ import annotations

import re

from ..errors import MepgenError
from .variant import Definition


def _calls(name: str) -> re.Pattern:
    """A call of `name` spelled unqualified: `name(`, `name<T>(`; not `x.name(`, `p->name(`, `ns::name(`."""
    return re.compile(rf"(?<![\w.:>]){re.escape(name)}(?=\s*(?:<[^;{{}}()]*>)?\s*\()")


def _qualified_call(name: str) -> re.Pattern:
    return re.compile(rf"::\s*{re.escape(name)}\s*(?:<[^;{{}}()]*>)?\s*\(")


def clone_changed(kernel_name: str, namespaces: list[str], new_kernel: Definition, changed: dict[str, Definition],
                  unchanged: dict[str, Definition], where: dict[str, str], taken: set[str]) -> tuple[str, list[Definition], list[str]]:
    """(the new kernel's text calling the copies, the copies to insert before it, notes).

    `changed`/`unchanged`: the variant's shared helpers by qualified name; `where`: file:line of each in the
    application; `taken`: identifiers the copies must not be named (the file's text is searched too)."""
    simple = lambda q: q.split("::")[-1]
    # the copies: every changed helper, then every unchanged one calling a copy (to a fixed point)
    copy = dict(changed)
    grew = True
    while grew:
        grew = False
        for q, d in unchanged.items():
            if q not in copy and any(_calls(simple(c)).search(d.text) for c in copy):
                copy[q] = d
                grew = True
    # only what the new kernel reaches, through copies (an operator is reached through expressions, not calls:
    # taken as reached, and refused below)
    reached = {q for q in copy if not re.fullmatch(r"[A-Za-z_]\w*", simple(q)) or re.match(r"operator\b", simple(q))}
    todo = [new_kernel.text]
    while todo:
        text = todo.pop()
        for q, d in copy.items():
            if q not in reached and _calls(simple(q)).search(text):
                reached.add(q)
                todo.append(d.text)
    notes = [f"the variant's change of {q} ({where.get(q, '?')}) is left out: the kernel does not call it"
             for q in changed if q not in reached]
    if not reached:
        return new_kernel.text, [], notes
    names = {}
    for q in sorted(reached):
        d, base = copy[q], simple(q)
        if not re.fullmatch(r"[A-Za-z_]\w*", base) or re.match(r"operator\b", base):
            raise MepgenError(f"the variant changes {q} ({where.get(q, '?')}), an operator the application shares: "
                              f"patch cannot give it a name of its own; write the change into the kernel by hand")
        if sum(simple(o) == base for o in [*changed, *unchanged]) > 1:
            raise MepgenError(f"the variant changes {q} ({where.get(q, '?')}), a helper the application shares, and "
                              f"{base} has overloads: patch cannot tell which calls to rename")
        if d.namespaces != namespaces:
            raise MepgenError(f"the variant changes {q} ({where.get(q, '?')}), a helper the application shares "
                              f"outside the kernel's namespace: patch changes only the kernel's; give the changed "
                              f"helper a new name")
        new = f"{base}_for_{kernel_name}"
        n = 2
        while new in taken:
            new, n = f"{base}_for_{kernel_name}{n}", n + 1
        taken.add(new)
        names[base] = new

    def rename(text: str) -> str:
        for old, new in names.items():
            text = _calls(old).sub(new, text)
        return text

    kernel_text = rename(new_kernel.text)
    for old in names:
        if _qualified_call(old).search(kernel_text):
            raise MepgenError(f"the new {kernel_name} calls {old} with a qualifier; patch renames only unqualified "
                              f"calls to the copy of the changed helper: edit it by hand")
    copies = []
    for q in [q for q in copy if q in reached]:          # in the variant's order: callees before callers
        d = copy[q]
        base = simple(q)
        head, body = _split_declarator(d.text, base)
        copies.append(Definition("::".join([*d.namespaces, names[base]]), d.namespaces,
                                 head + names[base] + rename(body), False))
        notes.append(f"{q} ({where.get(q, '?')}) changed: the kernel calls a copy of it, {names[base]}")
    return kernel_text, copies, notes


def _split_declarator(text: str, name: str) -> tuple[str, str]:
    """(the text before the function's own name in its declarator, the text after that name)."""
    m = re.search(rf"\b{re.escape(name)}(?=\s*\()", text)
    if m is None:
        raise MepgenError(f"cannot find the name {name} in its definition")
    return text[:m.start()], text[m.end():]
