/* Matrix-vector kernels in the C89 style of naive benchmark codes (written for mepgen's tests). */
#include <stdio.h>
#include <cuda_runtime.h>
#define DATA_TYPE float
#define N 2048
#define LOOP_N(v) N

__global__ void rows_acc(int n, DATA_TYPE *a, DATA_TYPE *x, DATA_TYPE *y)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < LOOP_N(n))
	{
		int j;
		for (j = 0; j < LOOP_N(n); j++)
		{
			y[i] += a[i * N + j] * x[j];
		}
	}
}

__global__ void cols_acc(int n, DATA_TYPE *a, DATA_TYPE *x, DATA_TYPE *y)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < LOOP_N(n))
	{
		int j;
		for (j = 0; j < LOOP_N(n); j++)
		{
			y[i] += a[j * N + i] * x[j];
		}
	}
}

__global__ void two_sums(int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *a, DATA_TYPE *b, DATA_TYPE *x, DATA_TYPE *y, DATA_TYPE *tmp)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < LOOP_N(n))
	{
		int j;
		for (j = 0; j < LOOP_N(n); j++)
		{
			tmp[i] += a[i * N + j] * x[j];
			y[i] += b[i * N + j] * x[j];
		}
		y[i] = alpha * tmp[i] + beta * y[i];
	}
}

int main(void)
{
	DATA_TYPE *a, *b, *x, *y, *t;
	cudaMalloc((void **)&a, sizeof(DATA_TYPE) * N * N);
	cudaMalloc((void **)&b, sizeof(DATA_TYPE) * N * N);
	cudaMalloc((void **)&x, sizeof(DATA_TYPE) * N);
	cudaMalloc((void **)&y, sizeof(DATA_TYPE) * N);
	cudaMalloc((void **)&t, sizeof(DATA_TYPE) * N);
	dim3 block(256, 1);
	dim3 grid((size_t)((N + 255) / 256), 1);
	rows_acc<<<grid, block>>>(N, a, x, y);
	cols_acc<<<grid, block>>>(N, a, x, y);
	two_sums<<<grid, block>>>(N, 1.5f, 0.5f, a, b, x, y, t);
	cudaDeviceSynchronize();
	printf("done\n");
	return 0;
}
