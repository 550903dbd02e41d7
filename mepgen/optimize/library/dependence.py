"""Linear integer systems, decided by Fourier-Motzkin elimination, for proofs that two accesses never meet.

A constraint is a linear form `{name: coefficient, "": constant}` read as `form <= 0`; an equality `form == 0`.
`feasible` answers False only when the system has no rational solution once every inequality is tightened for
integer variables (`2x - 3 <= 0` becomes `x - 1 <= 0`): a proof that no integer point satisfies it. True means
"could not prove it empty" (also when the elimination grows past a limit): callers refuse on True.

The access model's index polynomials (affine.py) become linear forms here when every monomial has at most one
atom; a product of two atoms (`i * n`) is not linear and is refused by the caller before it gets here.
"""
from __future__ import annotations

import math
from fractions import Fraction

Lin = dict

#: the elimination gives up (answers "may be feasible") past this many inequalities
LIMIT = 4000


def linear(poly: dict) -> Lin | None:
    """The linear form of an affine.py polynomial, None when a monomial multiplies two atoms."""
    out: Lin = {}
    for mono, c in poly.items():
        if len(mono) > 1:
            return None
        key = mono[0] if mono else ""
        out[key] = out.get(key, 0) + Fraction(c)
    return {k: v for k, v in out.items() if v != 0}


def combine(*terms: tuple[int | Fraction, Lin]) -> Lin:
    """sum(k * form) of the (k, form) pairs."""
    out: Lin = {}
    for k, form in terms:
        for n, v in form.items():
            out[n] = out.get(n, 0) + Fraction(k) * v
    return {n: v for n, v in out.items() if v != 0}


def rename(form: Lin, names: dict[str, str]) -> Lin:
    return {names.get(n, n): v for n, v in form.items()}


def _tighten(form: Lin) -> Lin:
    """An inequality over integer variables in lowest terms: integer coefficients divided by their gcd, the
    constant rounded the way that keeps every integer solution (`2x - 3 <= 0` -> `x - 1 <= 0`)."""
    if not any(n for n in form):
        return form
    den = math.lcm(*(v.denominator for v in form.values()))
    ints = {n: v * den for n, v in form.items()}
    g = math.gcd(*(int(v) for n, v in ints.items() if n))
    out = {n: Fraction(int(v), g) for n, v in ints.items() if n}
    c = ints.get("", Fraction(0)) / g
    out[""] = Fraction(math.ceil(c))           # sum(a x) <= -c over integers  <=>  sum(a x) <= floor(-c)
    return {n: v for n, v in out.items() if v != 0}


def _substitute(form: Lin, var: str, value: Lin) -> Lin:
    k = form.get(var, 0)
    if not k:
        return form
    rest = {n: v for n, v in form.items() if n != var}
    return combine((1, rest), (k, value))


def feasible(ineqs: list[Lin], eqs: list[Lin] = ()) -> bool:
    """Whether `ineqs` (each `<= 0`) and `eqs` (each `== 0`) may have an integer solution (False: proven not)."""
    ineqs, eqs = [dict(f) for f in ineqs], [dict(e) for e in eqs]
    for k in range(len(eqs)):          # each equality solved for one variable, substituted everywhere
        eq = eqs[k]
        pivot = next((n for n in sorted(eq) if n), None)
        if pivot is None:
            if eq.get("", 0) != 0:
                return False
            continue
        value = {n: -v / eq[pivot] for n, v in eq.items() if n != pivot}     # pivot = value
        eqs = eqs[:k + 1] + [_substitute(e, pivot, value) for e in eqs[k + 1:]]
        ineqs = [_substitute(f, pivot, value) for f in ineqs]
    system = [_tighten(f) for f in ineqs]
    while True:
        if any(not any(n for n in f) and f.get("", 0) > 0 for f in system):
            return False
        names = sorted({n for f in system for n in f if n})
        if not names:
            return True
        # eliminate the variable that makes the fewest new constraints
        def cost(n):
            pos = sum(1 for f in system if f.get(n, 0) > 0)
            neg = sum(1 for f in system if f.get(n, 0) < 0)
            return pos * neg - pos - neg
        var = min(names, key=cost)
        pos = [f for f in system if f.get(var, 0) > 0]
        neg = [f for f in system if f.get(var, 0) < 0]
        rest = [f for f in system if not f.get(var, 0)]
        new = [_tighten(combine((1 / p[var], p), (-1 / q[var], q))) for p in pos for q in neg]
        system = _unique(rest + new)
        if len(system) > LIMIT:
            return True


def _unique(forms: list[Lin]) -> list[Lin]:
    seen, out = set(), []
    for f in forms:
        key = tuple(sorted(f.items()))
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
