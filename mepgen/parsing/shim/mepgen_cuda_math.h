/* mepgen parse shim: the CUDA Math API and the device intrinsics, as device-side overloads.
 *
 * nvcc makes the math library callable from device code without any #include; clang's CUDA mode only
 * lets device code call functions declared __device__, and the host's <math.h> declares host functions.
 * So, as clang's own CUDA wrapper headers do, every function is declared here as a `static __device__`
 * overload next to the host declarations (clang overloads on the target). Declarations only: nothing here
 * is compiled, and a missing definition is at most a warning, which extraction ignores. */
#pragma once
#ifndef MEPGEN_CUDA_MATH_H
#define MEPGEN_CUDA_MATH_H

/* the constants nvcc's implicit headers give every file; no system header is included here (parsing
 * <math.h> and its C++ wrappers into every translation unit cost a third more extraction time) */
#ifndef INFINITY
#define INFINITY (__builtin_inff())
#endif
#ifndef NAN
#define NAN (__builtin_nanf(""))
#endif
#ifndef HUGE_VALF
#define HUGE_VALF (__builtin_huge_valf())
#endif
#ifndef HUGE_VAL
#define HUGE_VAL (__builtin_huge_val())
#endif

#define MEPGEN_D static __device__ __inline__

/* float name##f(float) and the unsuffixed double name(double) plus its float overload */
#define MEPGEN_MATH1(name) MEPGEN_D float name##f(float); MEPGEN_D double name(double); MEPGEN_D float name(float);
#define MEPGEN_MATH2(name) MEPGEN_D float name##f(float, float); MEPGEN_D double name(double, double); \
  MEPGEN_D float name(float, float);
#define MEPGEN_MATH3(name) MEPGEN_D float name##f(float, float, float); MEPGEN_D double name(double, double, double); \
  MEPGEN_D float name(float, float, float);

MEPGEN_MATH1(acos) MEPGEN_MATH1(acosh) MEPGEN_MATH1(asin) MEPGEN_MATH1(asinh) MEPGEN_MATH1(atan) MEPGEN_MATH1(atanh)
MEPGEN_MATH1(cbrt) MEPGEN_MATH1(ceil) MEPGEN_MATH1(cos) MEPGEN_MATH1(cosh) MEPGEN_MATH1(cospi) MEPGEN_MATH1(erf)
MEPGEN_MATH1(erfc) MEPGEN_MATH1(erfcinv) MEPGEN_MATH1(erfcx) MEPGEN_MATH1(erfinv) MEPGEN_MATH1(exp)
MEPGEN_MATH1(exp10) MEPGEN_MATH1(exp2) MEPGEN_MATH1(expm1) MEPGEN_MATH1(fabs) MEPGEN_MATH1(floor)
MEPGEN_MATH1(j0) MEPGEN_MATH1(j1) MEPGEN_MATH1(lgamma) MEPGEN_MATH1(log) MEPGEN_MATH1(log10) MEPGEN_MATH1(log1p)
MEPGEN_MATH1(log2) MEPGEN_MATH1(logb) MEPGEN_MATH1(nearbyint) MEPGEN_MATH1(normcdf) MEPGEN_MATH1(normcdfinv)
MEPGEN_MATH1(rcbrt) MEPGEN_MATH1(rint) MEPGEN_MATH1(round) MEPGEN_MATH1(rsqrt) MEPGEN_MATH1(sin) MEPGEN_MATH1(sinh)
MEPGEN_MATH1(sinpi) MEPGEN_MATH1(sqrt) MEPGEN_MATH1(tan) MEPGEN_MATH1(tanh) MEPGEN_MATH1(tgamma) MEPGEN_MATH1(trunc)
MEPGEN_MATH1(y0) MEPGEN_MATH1(y1) MEPGEN_MATH1(cyl_bessel_i0) MEPGEN_MATH1(cyl_bessel_i1)
MEPGEN_MATH2(atan2) MEPGEN_MATH2(copysign) MEPGEN_MATH2(fdim) MEPGEN_MATH2(fmax) MEPGEN_MATH2(fmin)
MEPGEN_MATH2(fmod) MEPGEN_MATH2(hypot) MEPGEN_MATH2(nextafter) MEPGEN_MATH2(pow) MEPGEN_MATH2(remainder)
MEPGEN_MATH2(rhypot)
MEPGEN_MATH3(fma) MEPGEN_MATH3(norm3d) MEPGEN_MATH3(rnorm3d)
MEPGEN_D float norm4df(float, float, float, float); MEPGEN_D double norm4d(double, double, double, double);
MEPGEN_D float rnorm4df(float, float, float, float); MEPGEN_D double rnorm4d(double, double, double, double);
MEPGEN_D float normf(int, const float *); MEPGEN_D double norm(int, const double *);
MEPGEN_D float rnormf(int, const float *); MEPGEN_D double rnorm(int, const double *);
MEPGEN_D float fdividef(float, float); MEPGEN_D float jnf(int, float); MEPGEN_D double jn(int, double);
MEPGEN_D float ynf(int, float); MEPGEN_D double yn(int, double);
MEPGEN_D float frexpf(float, int *); MEPGEN_D double frexp(double, int *);
MEPGEN_D float ldexpf(float, int); MEPGEN_D double ldexp(double, int); MEPGEN_D float ldexp(float, int);
MEPGEN_D float modff(float, float *); MEPGEN_D double modf(double, double *);
MEPGEN_D float remquof(float, float, int *); MEPGEN_D double remquo(double, double, int *);
MEPGEN_D float scalbnf(float, int); MEPGEN_D double scalbn(double, int);
MEPGEN_D float scalblnf(float, long); MEPGEN_D double scalbln(double, long);
MEPGEN_D int ilogbf(float); MEPGEN_D int ilogb(double);
MEPGEN_D long lrintf(float); MEPGEN_D long lrint(double); MEPGEN_D long lroundf(float); MEPGEN_D long lround(double);
MEPGEN_D long long llrintf(float); MEPGEN_D long long llrint(double);
MEPGEN_D long long llroundf(float); MEPGEN_D long long llround(double);
MEPGEN_D float nanf(const char *); MEPGEN_D double nan(const char *);
MEPGEN_D void sincosf(float, float *, float *); MEPGEN_D void sincos(double, double *, double *);
MEPGEN_D void sincospif(float, float *, float *); MEPGEN_D void sincospi(double, double *, double *);
MEPGEN_D bool isnan(float); MEPGEN_D bool isnan(double); MEPGEN_D bool isinf(float); MEPGEN_D bool isinf(double);
MEPGEN_D bool isfinite(float); MEPGEN_D bool isfinite(double);
MEPGEN_D bool signbit(float); MEPGEN_D bool signbit(double);
MEPGEN_D int abs(int); MEPGEN_D long labs(long); MEPGEN_D long long llabs(long long);
MEPGEN_D unsigned umin(unsigned, unsigned); MEPGEN_D long long llmin(long long, long long);
MEPGEN_D unsigned long long ullmin(unsigned long long, unsigned long long);
MEPGEN_D unsigned umax(unsigned, unsigned); MEPGEN_D long long llmax(long long, long long);
MEPGEN_D unsigned long long ullmax(unsigned long long, unsigned long long);
/* min/max: host and device, with nvcc's overloads for every pair of integer widths and signedness, so a
 * call such as min(size_t, int) resolves the way it does for nvcc */
#define MEPGEN_HD static __host__ __device__ __inline__
#define MEPGEN_MINMAX(R, A, B) MEPGEN_HD R min(A, B); MEPGEN_HD R max(A, B);
MEPGEN_MINMAX(int, int, int) MEPGEN_MINMAX(unsigned, unsigned, unsigned) MEPGEN_MINMAX(unsigned, int, unsigned)
MEPGEN_MINMAX(unsigned, unsigned, int) MEPGEN_MINMAX(long, long, long)
MEPGEN_MINMAX(unsigned long, unsigned long, unsigned long) MEPGEN_MINMAX(unsigned long, long, unsigned long)
MEPGEN_MINMAX(unsigned long, unsigned long, long) MEPGEN_MINMAX(long long, long long, long long)
MEPGEN_MINMAX(unsigned long long, unsigned long long, unsigned long long)
MEPGEN_MINMAX(unsigned long long, long long, unsigned long long)
MEPGEN_MINMAX(unsigned long long, unsigned long long, long long)
MEPGEN_MINMAX(float, float, float) MEPGEN_MINMAX(double, double, double) MEPGEN_MINMAX(double, float, double)
MEPGEN_MINMAX(double, double, float)
#undef MEPGEN_MINMAX
#undef MEPGEN_HD

/* intrinsics: fast math, rounding modes, conversions, bits */
MEPGEN_D float __exp10f(float); MEPGEN_D float __log2f(float); MEPGEN_D float __log10f(float);
MEPGEN_D float __tanf(float); MEPGEN_D void __sincosf(float, float *, float *);
#define MEPGEN_ROUNDED(name, T) MEPGEN_D T name##_rn(T, T); MEPGEN_D T name##_rz(T, T); MEPGEN_D T name##_ru(T, T); \
  MEPGEN_D T name##_rd(T, T);
MEPGEN_ROUNDED(__fadd, float) MEPGEN_ROUNDED(__fsub, float) MEPGEN_ROUNDED(__fmul, float)
MEPGEN_ROUNDED(__fdiv, float) MEPGEN_ROUNDED(__dadd, double) MEPGEN_ROUNDED(__dsub, double)
MEPGEN_ROUNDED(__dmul, double) MEPGEN_ROUNDED(__ddiv, double)
MEPGEN_D float __fmaf_rz(float, float, float); MEPGEN_D float __fmaf_ru(float, float, float);
MEPGEN_D float __fmaf_rd(float, float, float); MEPGEN_D float __fmaf_ieee_rn(float, float, float);
MEPGEN_D double __fma_rn(double, double, double); MEPGEN_D double __fma_rz(double, double, double);
MEPGEN_D double __fma_ru(double, double, double); MEPGEN_D double __fma_rd(double, double, double);
MEPGEN_D float __fsqrt_rn(float); MEPGEN_D float __frsqrt_rn(float); MEPGEN_D double __dsqrt_rn(double);
MEPGEN_D double __drcp_rn(double);
#define MEPGEN_CVT(name, From, To) MEPGEN_D To name##_rn(From); MEPGEN_D To name##_rz(From); \
  MEPGEN_D To name##_ru(From); MEPGEN_D To name##_rd(From);
MEPGEN_CVT(__float2uint, float, unsigned) MEPGEN_CVT(__float2ll, float, long long)
MEPGEN_CVT(__float2ull, float, unsigned long long) MEPGEN_CVT(__uint2float, unsigned, float)
MEPGEN_CVT(__ll2float, long long, float) MEPGEN_CVT(__ull2float, unsigned long long, float)
MEPGEN_CVT(__double2float, double, float) MEPGEN_CVT(__double2int, double, int)
MEPGEN_CVT(__double2uint, double, unsigned) MEPGEN_CVT(__double2ll, double, long long)
MEPGEN_CVT(__double2ull, double, unsigned long long) MEPGEN_CVT(__ll2double, long long, double)
MEPGEN_CVT(__ull2double, unsigned long long, double)
MEPGEN_D int __float2int_rz(float); MEPGEN_D int __float2int_ru(float); MEPGEN_D float __int2float_rz(int);
MEPGEN_D float __int2float_ru(int); MEPGEN_D float __int2float_rd(int);
MEPGEN_D double __int2double_rn(int); MEPGEN_D double __uint2double_rn(unsigned);
MEPGEN_D int __float_as_int(float); MEPGEN_D float __int_as_float(int); MEPGEN_D unsigned __float_as_uint(float);
MEPGEN_D float __uint_as_float(unsigned); MEPGEN_D long long __double_as_longlong(double);
MEPGEN_D double __longlong_as_double(long long); MEPGEN_D int __double2hiint(double); MEPGEN_D int __double2loint(double);
MEPGEN_D double __hiloint2double(int, int);
MEPGEN_D unsigned __brev(unsigned); MEPGEN_D unsigned long long __brevll(unsigned long long);
MEPGEN_D unsigned __byte_perm(unsigned, unsigned, unsigned); MEPGEN_D int __clzll(long long);
MEPGEN_D int __ffsll(long long); MEPGEN_D unsigned __fns(unsigned, unsigned, int); MEPGEN_D int __popcll(unsigned long long);
MEPGEN_D unsigned __funnelshift_l(unsigned, unsigned, unsigned); MEPGEN_D unsigned __funnelshift_lc(unsigned, unsigned, unsigned);
MEPGEN_D unsigned __funnelshift_r(unsigned, unsigned, unsigned); MEPGEN_D unsigned __funnelshift_rc(unsigned, unsigned, unsigned);
MEPGEN_D int __hadd(int, int); MEPGEN_D int __rhadd(int, int); MEPGEN_D unsigned __uhadd(unsigned, unsigned);
MEPGEN_D unsigned __urhadd(unsigned, unsigned); MEPGEN_D int __mul24(int, int); MEPGEN_D unsigned __umul24(unsigned, unsigned);
MEPGEN_D int __mulhi(int, int); MEPGEN_D unsigned __umulhi(unsigned, unsigned);
MEPGEN_D long long __mul64hi(long long, long long);
MEPGEN_D unsigned long long __umul64hi(unsigned long long, unsigned long long);
MEPGEN_D unsigned __sad(int, int, unsigned); MEPGEN_D unsigned __usad(unsigned, unsigned, unsigned);
MEPGEN_D unsigned __vabsdiffu4(unsigned, unsigned); MEPGEN_D unsigned __vadd4(unsigned, unsigned);
MEPGEN_D unsigned __vsub4(unsigned, unsigned); MEPGEN_D unsigned __vmaxu4(unsigned, unsigned);
MEPGEN_D unsigned __vminu4(unsigned, unsigned); MEPGEN_D unsigned __vcmpeq4(unsigned, unsigned);

/* warps, timing, memory spaces, device-side C library */
MEPGEN_D unsigned __reduce_add_sync(unsigned, unsigned); MEPGEN_D int __reduce_add_sync(unsigned, int);
MEPGEN_D unsigned __reduce_min_sync(unsigned, unsigned); MEPGEN_D int __reduce_min_sync(unsigned, int);
MEPGEN_D unsigned __reduce_max_sync(unsigned, unsigned); MEPGEN_D int __reduce_max_sync(unsigned, int);
MEPGEN_D unsigned __reduce_and_sync(unsigned, unsigned); MEPGEN_D unsigned __reduce_or_sync(unsigned, unsigned);
MEPGEN_D unsigned __reduce_xor_sync(unsigned, unsigned);
template <class T> MEPGEN_D unsigned __match_any_sync(unsigned, T);
template <class T> MEPGEN_D unsigned __match_all_sync(unsigned, T, int *);
MEPGEN_D int __uni_sync(unsigned, int);
MEPGEN_D void __nanosleep(unsigned); MEPGEN_D long clock(void); MEPGEN_D unsigned long long __globaltimer(void);
MEPGEN_D void __trap(void); MEPGEN_D void __brkpt(void); MEPGEN_D void __prof_trigger(int);
MEPGEN_D unsigned __isShared(const void *); MEPGEN_D unsigned __isGlobal(const void *);
MEPGEN_D unsigned __isConstant(const void *); MEPGEN_D unsigned __isLocal(const void *);
MEPGEN_D size_t __cvta_generic_to_shared(const void *); MEPGEN_D size_t __cvta_generic_to_global(const void *);
MEPGEN_D void *__cvta_shared_to_generic(size_t);
MEPGEN_D int printf(const char *, ...);
MEPGEN_D void *malloc(size_t); MEPGEN_D void free(void *);
MEPGEN_D void *memcpy(void *, const void *, size_t); MEPGEN_D void *memset(void *, int, size_t);
extern "C" __device__ void __assert_fail(const char *, const char *, unsigned, const char *);
extern "C" __device__ void __assertfail(const char *, const char *, unsigned, const char *, size_t);

#undef MEPGEN_MATH1
#undef MEPGEN_MATH2
/* host code: nvcc's cuda_runtime.h brings <math.h> into every file, so a launch written
 * `dim3 grid((size_t)ceil((float)N / block.x))` compiles without an #include; here the C library's
 * declarations of the functions such launch arithmetic calls stand in for it (the same declarations as
 * glibc's, so a later #include <math.h> or <cmath> redeclares them without conflict) */
#if defined(__cplusplus) && defined(__GLIBC__)
#if __cplusplus >= 201103L
#define MEPGEN_NOTHROW noexcept(true)
#else
#define MEPGEN_NOTHROW throw()
#endif
#define MEPGEN_HOSTMATH1(name) double name(double) MEPGEN_NOTHROW; float name##f(float) MEPGEN_NOTHROW;
#define MEPGEN_HOSTMATH2(name) double name(double, double) MEPGEN_NOTHROW; float name##f(float, float) MEPGEN_NOTHROW;
extern "C" {
MEPGEN_HOSTMATH1(ceil) MEPGEN_HOSTMATH1(floor) MEPGEN_HOSTMATH1(round) MEPGEN_HOSTMATH1(trunc)
MEPGEN_HOSTMATH1(sqrt) MEPGEN_HOSTMATH1(cbrt) MEPGEN_HOSTMATH1(log2) MEPGEN_HOSTMATH1(log10) MEPGEN_HOSTMATH1(log)
MEPGEN_HOSTMATH1(exp2) MEPGEN_HOSTMATH1(exp) MEPGEN_HOSTMATH1(fabs)
MEPGEN_HOSTMATH2(pow) MEPGEN_HOSTMATH2(fmin) MEPGEN_HOSTMATH2(fmax) MEPGEN_HOSTMATH2(fmod)
long lround(double) MEPGEN_NOTHROW; long lroundf(float) MEPGEN_NOTHROW;
long long llround(double) MEPGEN_NOTHROW; long long llroundf(float) MEPGEN_NOTHROW;
}
#undef MEPGEN_NOTHROW
#undef MEPGEN_HOSTMATH1
#undef MEPGEN_HOSTMATH2
#endif
#undef MEPGEN_MATH3
#undef MEPGEN_ROUNDED
#undef MEPGEN_CVT
#undef MEPGEN_D
#endif
