// stencils.cu -- a 2D 9-point smoothing step and a 3D 7-point diffusion step, one thread per point.
// Both leave the boundary ring alone (the caller imposes boundary values).
#include "dense.h"

// out = in + w * L9(in), L9 the isotropic 9-point Laplacian (edges weight 4, corners 1, centre -20) / 6.
__global__ void smooth9(const float* in, float* out, int nx, int ny, float w)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= 1 && i < nx - 1 && j >= 1 && j < ny - 1) {
        const float c = in[j * nx + i];
        const float edges = in[j * nx + (i - 1)] + in[j * nx + (i + 1)]
                          + in[(j - 1) * nx + i] + in[(j + 1) * nx + i];
        const float corners = in[(j - 1) * nx + (i - 1)] + in[(j - 1) * nx + (i + 1)]
                            + in[(j + 1) * nx + (i - 1)] + in[(j + 1) * nx + (i + 1)];
        out[j * nx + i] = c + w * (4.0f * edges + corners - 20.0f * c) * (1.0f / 6.0f);
    }
}

// u_new = u + nu * (sum of the 6 face neighbours - 6 u) on interior points of the volume.
__global__ void diffuse7(const float* u, float* u_new, Volume vol)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    const int k = blockIdx.z * blockDim.z + threadIdx.z;
    if (i > 0 && i < vol.nx - 1 && j > 0 && j < vol.ny - 1 && k > 0 && k < vol.nz - 1) {
        const int plane = vol.nx * vol.ny;
        const int idx = k * plane + j * vol.nx + i;
        const float faces = u[idx - 1] + u[idx + 1] + u[idx - vol.nx] + u[idx + vol.nx]
                          + u[idx - plane] + u[idx + plane];
        u_new[idx] = u[idx] + vol.nu * (faces - 6.0f * u[idx]);
    }
}

void image_smooth(const float* in, float* out, float weight)
{
    dim3 block(ST_BX, ST_BY);
    dim3 grid((IMG_NX + ST_BX - 1) / ST_BX, (IMG_NY + ST_BY - 1) / ST_BY);
    smooth9<<<grid, block>>>(in, out, IMG_NX, IMG_NY, weight);
    CUDA_CHECK(cudaGetLastError());
}

void volume_diffuse(const float* u, float* u_new, const Volume& vol)
{
    dim3 block(VOL_BX, VOL_BY, VOL_BZ);
    dim3 grid((VOL_NX + VOL_BX - 1) / VOL_BX, (VOL_NY + VOL_BY - 1) / VOL_BY, (VOL_NZ + VOL_BZ - 1) / VOL_BZ);
    diffuse7<<<grid, block>>>(u, u_new, vol);
    CUDA_CHECK(cudaGetLastError());
}
