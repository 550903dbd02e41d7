/* Column statistics in C89 style (written for mepgen's tests). */
#include <stdio.h>
#include <cuda_runtime.h>
#define DATA_TYPE float
#define NS 2048
#define NV 2048
#define BND(s, v) s

__global__ void col_mean(int nv, int ns, DATA_TYPE count, DATA_TYPE *mean, DATA_TYPE *data)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j < BND(NV, nv))
	{
		mean[j] = 0.0;
		int i;
		for (i = 0; i < BND(NS, ns); i++)
		{
			mean[j] += data[i * NV + j];
		}
		mean[j] /= count;
	}
}

__global__ void col_spread(int nv, int ns, DATA_TYPE count, DATA_TYPE *mean, DATA_TYPE *spread, DATA_TYPE *data)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j < BND(NV, nv))
	{
		spread[j] = 0.0;
		int i;
		for (i = 0; i < BND(NS, ns); i++)
		{
			spread[j] += (data[i * NV + j] - mean[j]) * (data[i * NV + j] - mean[j]);
		}
		spread[j] /= count;
		spread[j] = sqrtf(spread[j]);
	}
}

int main(void)
{
	DATA_TYPE *m, *s, *d;
	cudaMalloc((void **)&m, sizeof(DATA_TYPE) * NV);
	cudaMalloc((void **)&s, sizeof(DATA_TYPE) * NV);
	cudaMalloc((void **)&d, sizeof(DATA_TYPE) * NS * NV);
	dim3 block(256, 1);
	dim3 grid((size_t)((NV + 255) / 256), 1);
	col_mean<<<grid, block>>>(NV, NS, 2048.0f, m, d);
	col_spread<<<grid, block>>>(NV, NS, 2048.0f, m, s, d);
	cudaDeviceSynchronize();
	printf("done\n");
	return 0;
}
