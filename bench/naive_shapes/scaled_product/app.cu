/* A scaled product: Z = alpha * X * Y + beta * Z, C89 style. */
#include <stdio.h>
#include <cuda_runtime.h>
#define DATA_TYPE float
#define NR 512
#define NC 512
#define NK 512
#define SIZE_OF(sz, var) sz
#define ROWS_B SIZE_OF(NR, nr)
#define COLS_B SIZE_OF(NC, nc)
#define INNER_B SIZE_OF(NK, nk)

__global__ void scaled(int nr, int nc, int nk, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *X, DATA_TYPE *Y, DATA_TYPE *Z)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	int r = blockIdx.y * blockDim.y + threadIdx.y;
	int p;
	if ((r < ROWS_B) && (c < COLS_B))
	{
		Z[r * NC + c] *= beta;
		for (p = 0; p < INNER_B; p++)
		{
			Z[r * NC + c] += alpha * X[r * NK + p] * Y[p * NC + c];
		}
	}
}

int main(void)
{
	DATA_TYPE *X, *Y, *Z;
	cudaMalloc((void **)&X, sizeof(DATA_TYPE) * NR * NK);
	cudaMalloc((void **)&Y, sizeof(DATA_TYPE) * NK * NC);
	cudaMalloc((void **)&Z, sizeof(DATA_TYPE) * NR * NC);
	dim3 block(32, 8);
	dim3 grid((NC + 31) / 32, (NR + 7) / 8);
	scaled<<<grid, block>>>(NR, NC, NK, 1.5f, 0.5f, X, Y, Z);
	cudaDeviceSynchronize();
	printf("done\n");
	return 0;
}
