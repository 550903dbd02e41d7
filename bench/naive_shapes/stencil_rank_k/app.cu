/* More naive shapes, C89 style (written for mepgen's tests). */
#include <stdio.h>
#include <cuda_runtime.h>
#define DATA_TYPE float
#define NX 1024
#define NY 1024
#define NM 512
#define BND(s, v) s

__global__ void smooth9(int nx, int ny, DATA_TYPE *a, DATA_TYPE *b)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;
	DATA_TYPE w0, w1, w2;
	w0 = +0.25;  w1 = -0.5;  w2 = +0.125;
	if ((i < BND(NX, nx) - 1) && (j < BND(NY, ny) - 1) && (i > 0) && (j > 0))
	{
		b[i * NY + j] = w0 * a[(i - 1) * NY + (j - 1)] + w1 * a[(i + 0) * NY + (j - 1)] + w2 * a[(i + 1) * NY + (j - 1)]
			+ w1 * a[(i - 1) * NY + (j + 0)] + w0 * a[(i + 0) * NY + (j + 0)] + w1 * a[(i + 1) * NY + (j + 0)]
			+ w2 * a[(i - 1) * NY + (j + 1)] + w1 * a[(i + 0) * NY + (j + 1)] + w0 * a[(i + 1) * NY + (j + 1)];
	}
}

__global__ void field_update(int nx, int ny, DATA_TYPE *e, DATA_TYPE *h)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;
	if ((i < BND(NX, nx)) && (j < BND(NY, ny)) && (j > 0))
	{
		e[i * NY + j] = e[i * NY + j] - 0.5f * (h[i * NY + j] - h[i * NY + (j - 1)]);
	}
}

__global__ void rank_k(int n, int m, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *a, DATA_TYPE *c)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;
	if ((i < BND(NX, n)) && (j < BND(NX, n)))
	{
		c[i * NX + j] *= beta;
		int k;
		for (k = 0; k < BND(NM, m); k++)
		{
			c[i * NX + j] += alpha * a[i * NM + k] * a[j * NM + k];
		}
	}
}

int main(void)
{
	DATA_TYPE *a, *b, *c;
	cudaMalloc((void **)&a, sizeof(DATA_TYPE) * NX * NY);
	cudaMalloc((void **)&b, sizeof(DATA_TYPE) * NX * NY);
	cudaMalloc((void **)&c, sizeof(DATA_TYPE) * NX * NX);
	dim3 block(32, 8);
	dim3 grid((size_t)((NY + 31) / 32), (size_t)((NX + 7) / 8));
	smooth9<<<grid, block>>>(NX, NY, a, b);
	field_update<<<grid, block>>>(NX, NY, b, a);
	rank_k<<<grid, block>>>(NX, NM, 1.5f, 0.5f, a, c);
	cudaDeviceSynchronize();
	printf("done\n");
	return 0;
}
