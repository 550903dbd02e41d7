"""Host arithmetic in a launch or a scalar value, folded by nvcc into the pycuda entry's `__device__` initializers.

The native harness computes `dim3 grid((size_t)ceil((float)NI / 32))` on the host at run time; the pycuda entry
holds the same expression in a `__device__` variable's initializer, which must be a constant expression, and
<cmath>'s `ceil` is no `constexpr` function (nvcc: "dynamic initialization is not supported"). So the entry calls
`mepgen_fold::ceil` instead (PRELUDE, before the kernel file, so that its macros do not reach it): a `constexpr` function with the same result type and value as the host one for
every argument a launch can have (finite, integral or not; an argument beyond 2^52 is already integral). Casts,
`sizeof` and `?:` are constant expressions already. A call of anything else (a function of the application, `sqrt`,
`pow`) stays a reason to run the MEP on the native harness (devices.runtime_calls).
"""
from __future__ import annotations

import re

#: the functions folded (unqualified or `std::`); std::min/std::max are constexpr themselves
FOLDED = ("ceil", "ceilf", "floor", "floorf", "trunc", "truncf", "round", "roundf", "fabs", "fabsf", "abs", "labs",
          "llabs", "fmin", "fminf", "fmax", "fmaxf", "min", "max")
CONSTEXPR_ALREADY = ("std::min", "std::max")

_CALL = re.compile(r"(?<![\w.:])(?:std::|::)?(" + "|".join(FOLDED) + r")\s*\(")

#: C++ for the entry: one overload per argument type as <cmath> has it (an integral argument gives double)
PRELUDE = r"""
namespace mepgen_fold {
template <typename T> __host__ __device__ constexpr T whole(T x) {   /* truncation toward zero */
    return (x != x || x >= (T)4503599627370496.0 || x <= -(T)4503599627370496.0) ? x : (T)(long long)x; }
template <typename T> __host__ __device__ constexpr T up(T x) { return whole(x) < x ? whole(x) + 1 : whole(x); }
template <typename T> __host__ __device__ constexpr T down(T x) { return whole(x) > x ? whole(x) - 1 : whole(x); }
template <typename T> __host__ __device__ constexpr T away(T x) {   /* round half away from zero */
    return x - whole(x) >= (T)0.5 ? whole(x) + 1 : (whole(x) - x >= (T)0.5 ? whole(x) - 1 : whole(x)); }
template <typename T> __host__ __device__ constexpr T mag(T x) { return x < 0 ? -x : x; }
template <typename T> struct real { typedef double type; };
template <> struct real<float> { typedef float type; };
template <> struct real<long double> { typedef long double type; };
#define MEPGEN_FOLD1(NAME, HOW) \
    template <typename T> __host__ __device__ constexpr typename real<T>::type NAME(T x) { \
        return HOW((typename real<T>::type)x); }
#define MEPGEN_FOLD1F(NAME, HOW) __host__ __device__ constexpr float NAME(float x) { return HOW(x); }
MEPGEN_FOLD1(ceil, up) MEPGEN_FOLD1(floor, down) MEPGEN_FOLD1(trunc, whole) MEPGEN_FOLD1(round, away)
MEPGEN_FOLD1(fabs, mag)
MEPGEN_FOLD1F(ceilf, up) MEPGEN_FOLD1F(floorf, down) MEPGEN_FOLD1F(truncf, whole) MEPGEN_FOLD1F(roundf, away)
MEPGEN_FOLD1F(fabsf, mag)
#undef MEPGEN_FOLD1
#undef MEPGEN_FOLD1F
__host__ __device__ constexpr int abs(int x) { return mag(x); }
__host__ __device__ constexpr long abs(long x) { return mag(x); }
__host__ __device__ constexpr long long abs(long long x) { return mag(x); }
__host__ __device__ constexpr float abs(float x) { return mag(x); }
__host__ __device__ constexpr double abs(double x) { return mag(x); }
__host__ __device__ constexpr long labs(long x) { return mag(x); }
__host__ __device__ constexpr long long llabs(long long x) { return mag(x); }
template <typename A, typename B> struct both { typedef double type; };
template <> struct both<float, float> { typedef float type; };
template <typename A, typename B> __host__ __device__ constexpr typename both<A, B>::type fmin(A a, B b) {
    return (typename both<A, B>::type)a < (typename both<A, B>::type)b ? a : b; }
template <typename A, typename B> __host__ __device__ constexpr typename both<A, B>::type fmax(A a, B b) {
    return (typename both<A, B>::type)a < (typename both<A, B>::type)b ? b : a; }
__host__ __device__ constexpr float fminf(float a, float b) { return a < b ? a : b; }
__host__ __device__ constexpr float fmaxf(float a, float b) { return a < b ? b : a; }
template <typename A, typename B> __host__ __device__ constexpr auto min(A a, B b) -> decltype(a + b) {
    return (decltype(a + b))a < (decltype(a + b))b ? a : b; }
template <typename A, typename B> __host__ __device__ constexpr auto max(A a, B b) -> decltype(a + b) {
    return (decltype(a + b))a < (decltype(a + b))b ? b : a; }
}
"""


def rewrite(expr: str) -> str:
    """`expr` with each folded function called through mepgen_fold (`ceil(` -> `(mepgen_fold::ceil)(`: in
    parentheses, so that a function-like macro of the same name in the kernel's headers, `#define min(a, b) ...`,
    does not expand there)."""
    return _CALL.sub(lambda m: f"(mepgen_fold::{m.group(1)})(", expr)


def folds(name: str) -> bool:
    """Whether a call of `name` (as devices.runtime_calls found it) is folded, or constexpr already."""
    bare = name[2:] if name.startswith("::") else name
    bare = bare[5:] if bare.startswith("std::") and bare not in CONSTEXPR_ALREADY else bare
    return bare in FOLDED or bare in CONSTEXPR_ALREADY
