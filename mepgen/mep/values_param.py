"""Values of function parameters: the argument every caller passes (in any file), and the command line (`argv`,
getopt options) with the application's own default or its run command's value. A mixin of the Resolver
(resolve.py): it reads the resolver's project and symbols, and calls back only through `self`."""
from __future__ import annotations

import re

from ..cexpr import integer
from . import flow
from .argtests import argc_value
from .argvalue import flag, from_run
from .flow import modified_locals
from .readers import Why, kind_of, origin
from .recursion import outer_calls, outermost_note
from .syntax import is_integral, strip


class ParameterValues:
    """The values of parameters: from the callers' arguments or the command line."""

    def _param(self, d) -> str | None:
        for frame in reversed(self.bindings):
            if d.get_usr() in frame:
                arg, _ = frame[d.get_usr()]
                return self.expr(arg)
        argc = argc_value(self.p, d, d.location.file.name if d.location.file is not None else None)
        if argc is not None:
            self.choices.append(argc[1])
            return argc[0]
        index, fn = self.param_index(d)
        if fn is None:
            return None
        mark = len(self.unsure)
        if self._changed_param(d, fn):
            # `void run(char* f, unsigned n) { init(f, n); k<<<n, ..>>>(); }` with `init(.., unsigned& n)`: the
            # value at the point is the one the function gave it, not what its caller passed
            handled, value = self._followed(d)
            if value is not None or len(self.unsure) > mark:
                return value if value is not None else self._symbol_for(d, None, unsure=True)
        here = fn.location.file.name if fn.location.file is not None else None
        callers, recursive = outer_calls(fn, self.p.callers(fn))    # plain C/C++ sources are read now (hostsrc.py)
        calls = sorted(callers,                                 # callers of the same file (program) first
                       key=lambda cc: (cc[1].location.file.name if cc[1].location.file is not None else None) != here)
        for call, caller in calls:
            with self.inside(caller, call.extent.start.offset):
                value = self.call_arg(call, index)
            if value is not None:
                if recursive:
                    self.choices.append(outermost_note(d.spelling, fn.spelling, self.where(call)))
                return value
            args = list(call.get_arguments())
            read = origin(self.p, args[index], self.p.text(args[index]), self.where(call)) \
                if 0 <= index < len(args) else None
            if read is not None:        # `step(t[k])`: the caller passes an element of its data
                self.unsure.append(read)
        why = next((w for w in reversed(self.unsure[mark:]) if kind_of(w) is not None), None)
        if why is not None:     # the callers pass a value read from input: say so at this parameter
            name = fn.spelling
            return self._symbol_for(d, None, why=Why(f"`{d.spelling}` in {name}() is what its caller passes: {why}",
                                                     kind_of(why)))
        if not callers:         # no source calls it: an entry point, or its caller is in a file that did not parse
            detail = self.p.host.why_not_found(fn.spelling)
            return self._symbol_for(d, None, why=Why(f"`{d.spelling}` is a parameter of {fn.spelling}(), which no "
                                                     f"source mepgen parsed calls{detail}"))
        return self._symbol_for(d, None)

    def _changed_param(self, d, fn) -> bool:
        """Whether the function whose parameter `d` is changes it before the point the value is wanted at."""
        body = fn if fn.is_definition() else self.p.find_function(fn.get_usr())
        at = self._point(body) if body is not None else None
        # an address stored for a launch (`void* args[] = {&n, ..}; cudaLaunchKernel(..)`) changes nothing
        return at is not None and d.get_usr() in modified_locals(self.p, body) and any(
            m.node.extent.start.offset < at and (m.op != "?" or m.node.kind.name == "CALL_EXPR" or any(
                x.kind.name == "CALL_EXPR" for x in m.path)) for m in flow.modifications(body, d.get_usr()))

    def param_index(self, d):
        fn = d.semantic_parent
        if fn is None:
            return -1, None
        parms = [x for x in fn.get_children() if x.kind.name == "PARM_DECL"]
        for i, x in enumerate(parms):
            if x.get_usr() == d.get_usr() or (x.spelling == d.spelling and x.location.offset == d.location.offset):
                return i, fn
        return -1, None

    def _argv_symbol(self, d, text: str, where: str, default: str | None, option: str | None = None) -> str | None:
        """The value of a variable the command line sets: the argument of the application's own run command
        (a stated choice, in the notes), else a size symbol whose todo names the argument, the application's
        default (the value it runs with when the argument is not given) when the code has one, and why the
        run command did not give it (mep/argvalue.py)."""
        integral = is_integral(d.type)
        value = integer(default, {**self.p.macros, **self.symbols.defaults, **self.symbols.from_run}) \
            if default is not None and integral else None
        fn = d.semantic_parent.spelling if d.semantic_parent is not None else "?"
        got = from_run(self.p, d.spelling, text, integral,
                       str(value) if value is not None else (default if not integral else None), option,
                       d.location.file.name if d.location.file is not None else None)
        name = self.symbols.preferred.get(d.get_usr(), d.spelling)
        if got.value is not None:
            self.choices.append(got.note)
            if not integral:
                return got.value
            reason = f"`{d.spelling}` in {fn}() comes from the command line at {where}; {got.note}"
            sym = self.symbols.get(f"argv:{d.get_usr()}", name, reason, self.taken)
            self.symbols.from_run[sym] = int(got.value)
            return sym
        if not integral:
            return None
        arg = re.search(r"argv\s*\[[^\]]*\]", text)
        shown = f"option {flag(option)}" if option else arg.group(0) if arg else text
        reason = (f"`{d.spelling}` in {fn}() comes from the command line (`{shown}` at "
                  f"{where})")
        reason += f"; the application's default without it is {value}, used here" if value is not None \
            else "; the code gives it no default"
        reason += f"; {got.note}"
        sym = self.symbols.get(f"argv:{d.get_usr()}", name, reason, self.taken)
        if value is not None:
            self.symbols.defaults[sym] = value
        return sym

    def _argv_init(self, d, init) -> str | None:
        """The symbol of a variable initialized from the command line: `argc > 1 ? atoi(argv[1]) : 1024`."""
        c = strip(init)
        while c is not None and c.kind.name in ("PAREN_EXPR", "UNEXPOSED_EXPR") and len(list(c.get_children())) == 1:
            c = strip(list(c.get_children())[0])
        default = None
        if c is not None and c.kind.name == "CONDITIONAL_OPERATOR":
            kids = list(c.get_children())
            if len(kids) == 3:
                other = [k for k in kids[1:] if not any(t.spelling == "argv" for t in k.get_tokens())]
                if len(other) == 1:
                    default = self.expr(other[0])
        return self._argv_symbol(d, self.p.text(init), self.where(d), default)
