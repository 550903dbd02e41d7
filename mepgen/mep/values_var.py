"""Values of host variables: a local or global followed from its declaration through the changes that certainly run
before the point the value is wanted (flow.py's facts), a value stored through a pointer by a called function,
and conditions decided on the way. A mixin of the Resolver (resolve.py): it reads the resolver's project, scopes
and symbols, and calls back only through `self`."""
from __future__ import annotations

import re

from ..cexpr import evaluate, names
from . import flow
from .cstrings import expanded
from .dim3 import DIM3_TYPES, apply_step, decl_name
from .inputs import read_into
from .members import device_written
from .project import walk
from .readers import Why, kind_of, origin, stored_by
from .syntax import init_expr, operator_of, strip


class VariableValues:
    """The values of host variables (locals, globals) followed to the point they are wanted."""

    def _point(self, fn) -> int | None:
        """The offset in `fn` where values are wanted, if a scope being resolved names one."""
        if fn is None:
            return None
        usr, file = fn.get_usr(), fn.location.file.name if fn.location.file is not None else None
        for f, at in zip(reversed(self.scope), reversed(self.points)):
            if f is not None and at is not None and f.get_usr() == usr and \
                    (f.location.file.name if f.location.file is not None else None) == file:
                return at
        return None

    def _followed(self, d, within=None) -> tuple[bool, str | None]:
        """(handled, value) of a local that changes after its declaration: its value at the point the resolver
        is asked about, following the assignments that certainly run before it (mep/flow.py). `within`: for a
        global that only that function changes, the function; the value it had on entry is unknown (an earlier
        call may have changed it), so only an assignment of the whole value that certainly runs before the
        point gives one: (False, None) otherwise."""
        parent = d.semantic_parent if within is None else within
        at = self._point(parent)
        fn = parent if parent is not None and parent.is_definition() else \
            self.p.find_function(parent.get_usr()) if parent is not None else None
        if at is None or fn is None:
            return False, None
        argv: list = []
        cmark = len(self.cond_why)
        try:
            steps = flow.steps_before(fn, d.get_usr(), d.spelling, flow.path_to(fn, at), at, self.choices,
                                      self.where, argv, decide=lambda cond: self._decide(fn, cond),
                                      stored=lambda call: stored_by(self.p, call, d.spelling, self.where(call)))
        except flow.Unsure as e:
            why, inner = e.args[0], self.cond_why[-1] if len(self.cond_why) > cmark else None
            if "under a condition" in why and kind_of(why) is None and inner is not None:
                why = Why(f"{why}, which depends on this: {inner}", kind_of(inner))
            if kind_of(why) is None:        # what it is built from may come from the input (mep/inputs.py)
                read = read_into(self.p, d, fn, self.where)
                why = Why(f"{why}; {read}", read.kind) if read is not None else why
            self.unsure.append(why)
            return True, None
        if within is not None and (argv or not steps or steps[0].op != "=" or steps[0].member is not None):
            return False, None
        if argv:
            default = None
            if all(conditional for _, conditional, _ in argv):
                handled, default = self._value_from(d, fn, steps)
            m, _, option = argv[-1]
            if option is not None and len({o for _, _, o in argv}) > 1:
                self.unsure.append(f"`{d.spelling}` is set by several command-line options")
                return True, None
            text = expanded(self.p, fn, m) if m.rhs is not None else self.p.text(m.call)   # `sscanf(argv[2], ..)`
            return True, self._argv_symbol(d, text, self.where(m.node), default, option)
        return self._value_from(d, fn, steps)

    def _stored_through(self, call, index: int, d) -> str | None:
        """The value a function stores through its pointer parameter `index` (`void init(float* dt) { *dt =
        0.01f; }`): one unconditional `*p = expr` in its body and no other use of `p`; else None."""
        ref = call.referenced
        fn = self.p.find_function(ref.get_usr()) if ref is not None else None
        parms = [x for x in fn.get_children() if x.kind.name == "PARM_DECL"] if fn is not None else []
        body = next((c for c in fn.get_children() if c.kind.name == "COMPOUND_STMT"), None) if fn else None
        if index < 0 or index >= len(parms) or body is None:
            return None
        pusr = parms[index].get_usr()
        uses = [n for n in walk(body) if n.kind.name == "DECL_REF_EXPR" and n.referenced is not None
                and n.referenced.get_usr() == pusr]
        stores = []
        for st in body.get_children():
            n = strip(st)
            kids = list(n.get_children()) if n is not None else []
            if n is not None and n.kind.name == "BINARY_OPERATOR" and len(kids) == 2 and operator_of(n, kids) == "=":
                lhs = strip(kids[0])
                inner = strip(next(iter(lhs.get_children()), None)) if lhs.kind.name == "UNARY_OPERATOR" else None
                if inner is not None and operator_of(lhs, list(lhs.get_children())) == "*" \
                        and inner.kind.name == "DECL_REF_EXPR" and inner.referenced is not None \
                        and inner.referenced.get_usr() == pusr:
                    stores.append((n, kids[1]))
        if len(stores) != 1 or len(uses) != 1:
            return None
        node, rhs = stores[0]
        args = list(call.get_arguments())
        self.bindings.append({x.get_usr(): (a, None) for x, a in zip(parms, args)})
        try:
            with self.inside(fn, node.extent.start.offset):
                value = self.expr(rhs)
        finally:
            self.bindings.pop()
        if value is not None:
            self.choices.append(f"`{d.spelling}` is set by {fn.spelling}() at {self.where(node)}: "
                                f"{self.p.text(rhs)}")
        return value

    def _decide(self, fn, cond) -> bool | None:
        """The value of an `if` condition when it depends on constants only (macros, traced values), by the
        compiler; None when it depends on a value mepgen did not trace."""
        mark = len(self.unsure)
        with self.inside(fn, cond.extent.start.offset):
            text = self.expr(cond)
        unknown = names(text) & set(self.symbols.reasons) - set(self.symbols.from_run) if text is not None else set()
        if text is None or unknown:
            # why it cannot be decided, when that is a value of the input or of the run
            inner = [w for w in self.unsure[mark:] if kind_of(w)] + \
                [self.symbols.reasons[n] for n in sorted(unknown) if n in self.symbols.kinds]
            self.cond_why.append(inner[-1] if inner else None)
            return None
        # a pointer left at its null default (`if (input_file)` when the run gives no `-i`) tests false
        text = re.sub(r"\b(NULL|nullptr)\b", "0", text)
        value = evaluate(text, {**self.p.macros, **self.symbols.from_run})    # run-command values: stated already
        return None if value is None else bool(value)

    def _value_from(self, d, fn, steps) -> tuple[bool, str | None]:
        """The declaration's value with the followed changes applied."""
        init = init_expr(d)
        value = None
        if init is not None:
            mark = len(self.unsure)
            with self.inside(fn, d.extent.start.offset):
                value = self.expr(init)
                if value is None and any(n.kind.name == "DECL_REF_EXPR" and n.spelling == "argv"
                                             for n in walk(init)):
                    # `int w = atoi(argv[1]); w = (w + 255) / 256 * 256;`: the run command's value, then changed
                    value = self._argv_init(d, init)
            if value is None and not (steps and steps[0].op == "=" and steps[0].member is None):
                said = f"`{d.spelling}` in {fn.spelling}() is `{self._written(d, init)}`"
                self.unsure.append(origin(self.p, init, d.spelling, self.where(d)) or self._depends(said, mark)
                                   or f"{said}, which mepgen could not trace to a value")
                return True, None
        elif decl_name(d.type) in DIM3_TYPES:
            value = "dim3(1, 1, 1)"        # `dim3 blocks;`: CUDA's default constructor
        for st in steps:
            if st.op == "&arg":                  # `init(&dt)`: what init() stores through its parameter
                value = self._stored_through(st.call, st.index, d)
                if value is None:
                    self.unsure.append(stored_by(self.p, st.call, d.spelling, self.where(st.call)) or
                                       f"`{d.spelling}` is set through a pointer by {st.call.spelling}() at "
                                       f"{self.where(st.call)} in a way mepgen does not follow")
                    return True, None
                continue
            rhs = None
            if st.rhs is not None:
                mark = len(self.unsure)
                with self.inside(fn, st.offset):
                    rhs = self.expr(st.rhs)
                if rhs is None:
                    said = f"`{d.spelling}` is assigned `{self.p.text(st.rhs)}` at {self.where(st.rhs)}"
                    self.unsure.append(origin(self.p, st.rhs, d.spelling, self.where(st.rhs)) or
                                       self._depends(said, mark) or f"{said}, which mepgen could not trace to a value")
                    return True, None
            value = apply_step(value, st, rhs, d.type)
            if value is None:
                self.unsure.append(f"`{d.spelling}` changes at {self.where(d)}.. in a way mepgen does not follow "
                                   f"(`{st.op}` on {st.member or 'the whole value'})")
                return True, None
        return True, value

    def _global(self, d) -> tuple[bool, str | None]:
        """(handled, value) of a namespace-scope variable that functions of the application assign: set once,
        to one value (an init function's `g_alpha = 0.25f;`), it holds that value; anything else is unsure."""
        try:
            external = d.linkage.name == "EXTERNAL"
        except ValueError:
            external = True
        if external:        # a plain C/C++ source may set it (`layer_size = atoi(argv[1])` in main.c)
            self.p.read_host_files(d.spelling, writes=True)
        writes = flow.global_writes(self.p).get(d.get_usr(), [])
        if not writes:
            return False, None
        gpu = device_written(self.p, d.spelling, writes, self.where)
        if gpu is not None:         # `atomicAdd(&N, 1)` in a kernel: the host reads what the GPU computed
            self.unsure.append(gpu)
            return True, None
        fn, m = writes[0]
        if all(f == fn for f, _ in writes) and self._point(fn) is not None:
            # `num_blocks = n / 16; k<<<num_blocks, 16>>>(...)` in the one function that sets the global
            mark = len(self.unsure)
            handled, value = self._followed(d, within=fn)
            if handled:
                return handled, value
            del self.unsure[mark:]
        if len(writes) == 1 and m.op == "=" and m.member is None and flow.argv_write(m):
            # `void init(int argc, char** argv) { if (argc == 4) cols = atoi(argv[1]); else exit(1); }`
            with self.inside(fn, m.node.extent.start.offset):
                return True, self._argv_symbol(d, self.p.text(m.rhs), self.where(m.node), None)
        texts = {self.p.text(w.rhs) if w.rhs is not None else None for _, w in writes}
        if any(w.op != "=" or w.member is not None or w.rhs is None for _, w in writes) or len(texts) != 1:
            read = next(filter(None, (self._input_write(d, w) for _, w in writes)), None)
            self.unsure.append(Why(f"{read}; it is changed in {len(writes)} place(s)", read.kind) if read else
                               f"`{d.spelling}` is changed in {len(writes)} place(s) ({self.where(m.node)} first) "
                               "and mepgen does not know which holds at the launch")
            return True, None
        if init_expr(d) is not None:
            self.unsure.append(f"`{d.spelling}` has an initializer and is set again at {self.where(m.node)}")
            return True, None
        if any(x.kind.name in flow.BRANCHES + flow.LOOPS for _, w in writes for x in w.path):
            self.unsure.append(f"`{d.spelling}` is set at {self.where(m.node)} under a condition or in a loop")
            return True, None
        mark = len(self.unsure)
        with self.inside(fn, m.node.extent.start.offset):
            value = self.expr(m.rhs)
        if value is None:
            said = f"`{d.spelling}` is set to `{self.p.text(m.rhs)}` at {self.where(m.node)}"
            self.unsure.append(origin(self.p, m.rhs, d.spelling, self.where(m.node)) or self._depends(said, mark)
                               or f"{said}, which mepgen could not trace to a value")
            return True, None
        self.choices.append(f"`{d.spelling}` is set once, in {fn.spelling}() at {self.where(m.node)}: "
                            f"{self.p.text(m.rhs)}")
        return True, value

    def _input_write(self, d, w) -> Why | None:
        """Why one change of `d` gives it a value of the application's input or of the run, else None."""
        if w.op in ("&arg", "?") and w.node.kind.name in ("CALL_EXPR", "BINARY_OPERATOR") or w.call is not None:
            return stored_by(self.p, w.call if w.call is not None else w.node, d.spelling, self.where(w.node))
        return origin(self.p, w.rhs, d.spelling, self.where(w.node))

    def _depends(self, said: str, mark: int) -> Why | None:
        """`said`, and that it depends on a value of the input or of the run, when one of the reasons given since
        `mark` says so (`nelr = 16 * (nel / 16 + 1)` after `file >> nel`): a derived value keeps its origin."""
        inner = next((w for w in reversed(self.unsure[mark:]) if kind_of(w) is not None), None) or \
            next((w for w in reversed(self.unsure[mark:]) if "which no source mepgen parsed calls" in w
                  or w.startswith("`->")), None)       # a field set in several places (mep/fields.py)
        return Why(f"{said}, which depends on this: {inner}", kind_of(inner)) if inner is not None else None
