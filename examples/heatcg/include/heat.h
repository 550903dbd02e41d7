// heat.h -- host interface of the explicit advection-diffusion stencil (src/stencil.cu).
#pragma once

#include <cuda_runtime.h>

#include "types.h"

namespace heat {

// Coefficients of a first-order upwind advection operator for a constant
// drift velocity (vx, vy), ordered {center, west, east, south, north} as
// expected by heat_set_constants().
void upwind_coefficients(float vx, float vy, const Grid& g, float coef[5]);

// Upload the advection stencil coefficients and the grid description to
// constant memory. Must be called before heat_step()/heat_boundary().
void heat_set_constants(const float coef[5], const Grid& g);

// One explicit Euler step: u_new = u + dt * (alpha * lap(u) + adv(u)) on
// interior points. Boundary values of u_new are left untouched.
void heat_step(const float* u, float* u_new, const Grid& g, float alpha, float dt, cudaStream_t s);

// Impose boundary conditions on the outer ring of u.
void heat_boundary(float* u, int nx, int ny, BoundaryKind kind, float value, cudaStream_t s);

}  // namespace heat
