/* mepgen fallback for clang's resource header, used only when no compiler's own is found. */
#pragma once
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef __WCHAR_TYPE__ wchar_t;
typedef struct { long long __ll; long double __ld; } max_align_t;
#ifndef NULL
#define NULL __null
#endif
#define offsetof(t, m) __builtin_offsetof(t, m)
