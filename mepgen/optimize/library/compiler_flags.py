"""Compiler flags instead of source changes: `-use_fast_math` (approximate division, square roots and
transcendentals, denormals flushed to zero) and `-Xptxas -O3` (the device assembler's highest level,
stated explicitly). The kernel text stays as it is; the candidate is built with the extra flags
(Proposal.nvcc_flags) and judged against the baseline built with mep.yaml's own.

`-use_fast_math` changes float results, so it is offered only when every output of the MEP has a
tolerance of at least 1e-4 relative in mep.yaml; a flag mep.yaml already passes is not offered again. Where the
kernel calls a function fast math replaces by a hardware approximation (`powf`, `expf`, `logf`, `sinf`, `sqrtf`, ...), fast
math is the first point tried: there it can change what bounds the kernel (a `powf` per term of a sum), while
`-Xptxas -O3` restates ptxas's default level at nvcc's -O3. A flag the application already builds with (its
flags reach mep.yaml, mep/buildcfg.py: `-use_fast_math`, `-Xptxas -O3,-v`) is never offered: it could only
"win" by restoring what the application has.
`mepgen patch` cannot write flags into the application's build system: it prints them for the user.
"""
from __future__ import annotations

from .base import Rewrite, Transformation
from .source import Refused

FAST_MATH = "-use_fast_math"
PTXAS_O3 = "-Xptxas -O3"
MIN_RTOL = 1e-4
#: float functions that -use_fast_math computes with the hardware's approximations (and their double spellings,
#: which a float argument may reach through overloads)
APPROXIMATED = {"powf", "expf", "exp2f", "exp10f", "logf", "log2f", "log10f", "sinf", "cosf", "tanf", "sincosf",
                "sqrtf", "pow", "exp", "log", "sin", "cos", "tan", "sqrt"}


def ptxas_options(flags: list[str]) -> list[str]:
    """The options nvcc hands ptxas: `-Xptxas -O3,-v`, `-Xptxas=-O3`, `--ptxas-options -O3`, `--ptxas-options=-O3`."""
    out = []
    for i, f in enumerate(flags):
        value = None
        if f in ("-Xptxas", "--ptxas-options") and i + 1 < len(flags):
            value = flags[i + 1]
        elif f.startswith(("-Xptxas=", "--ptxas-options=")):
            value = f.split("=", 1)[1]
        if value is not None:
            out += [v.strip() for v in value.split(",") if v.strip()]
    return out


class CompilerFlags(Transformation):
    def __init__(self):
        super().__init__("nvcc_flags", "extra nvcc flags (fast math, ptxas -O3)", {})

    @staticmethod
    def _fast_math_refusal(spec) -> str:
        for p in spec.outputs:
            tol = spec.verify.tolerance.get(p.name)
            if tol is None or tol.rtol < MIN_RTOL:
                return (f"{FAST_MATH} needs every output within rtol >= {MIN_RTOL:g}: {p.name} has "
                        f"{'no tolerance' if tol is None else f'rtol {tol.rtol:g}'}")
        return ""

    def _options(self, spec, src=None) -> tuple[list[str], list[str]]:
        own = list(spec.build.nvcc_flags)      # the application's own flags reach here (mep/buildcfg.py)
        why = []
        fast = not (set(own) & {FAST_MATH, "--use_fast_math", "-use-fast-math", "--use-fast-math"})
        if not fast:
            why.append(f"mep.yaml already builds with {FAST_MATH} (the application's flags reach it)")
        if fast and self._fast_math_refusal(spec):
            why.append(self._fast_math_refusal(spec))
            fast = False
        o3 = "-O3" not in ptxas_options(own)
        if not o3:
            why.append(f"mep.yaml already passes {PTXAS_O3} (the application's flags reach it)")
        options = ([PTXAS_O3] if o3 else []) + ([FAST_MATH] if fast else []) + \
            ([f"{FAST_MATH} {PTXAS_O3}"] if fast and o3 else [])
        if fast and src is not None and APPROXIMATED & set(src.calls()):
            options.remove(FAST_MATH)
            options.insert(0, FAST_MATH)
        return options, why

    def leads(self, src, spec) -> bool:
        """Fast math leads where the kernel calls a function it approximates: such a call per term of a sum
        (`powf`, `sqrtf`) is what bounds the kernel, and no source rewrite removes it."""
        options, _ = self._options(spec, src)
        return bool(options) and options[0] == FAST_MATH

    def space(self, src, spec, launch):
        options, why = self._options(spec, src)
        if not options:
            raise Refused("; ".join(why) or "no compiler flag to try")
        return {"flags": options}

    def apply(self, src, spec, launch, params):
        options, why = self._options(spec, src)
        value = str(params.get("flags", PTXAS_O3))
        if value not in options:
            raise Refused(f"`{value}` is not offered here" + (f": {'; '.join(why)}" if why else ""))
        what = {PTXAS_O3: "ptxas at -O3", FAST_MATH: "fast math (approximate float functions, denormals flushed; "
                                                         f"every output allows rtol >= {MIN_RTOL:g})"}
        desc = " and ".join(what[f] for f in (FAST_MATH, PTXAS_O3) if f in value)
        return Rewrite(src.text, f"compiler flags: build with `{value}` ({desc}); the kernel text is unchanged and "
                                 f"mepgen patch prints the flags for the application's build", nvcc_flags=value.split())
