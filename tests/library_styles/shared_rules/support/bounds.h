/* Loop bounds either as the compile-time size or as the run-time argument, chosen here for every program. */
#ifndef BOUNDS_H
#define BOUNDS_H
#define BOUNDS_FROM_ARGUMENTS
#ifdef BOUNDS_FROM_ARGUMENTS
#define BOUND_OF(size, arg) arg
#else
#define BOUND_OF(size, arg) size
#endif
#endif
