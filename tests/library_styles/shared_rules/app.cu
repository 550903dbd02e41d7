/* Style E: bounds through a macro of a shared header (bounds.h) that picks the run-time argument, launch grids
 * in float arithmetic without <math.h> (nvcc declares ceil), and 1D work on 32x8 blocks: the 8 threads along y
 * of a block repeat the same work. */
#include <stdio.h>
#include "bounds.h"

#define DATA_TYPE float
#define NR 1024
#define NC 1024
#define NK 1024

#define ROWS_B BOUND_OF(NR, nr)
#define COLS_B BOUND_OF(NC, nc)
#define INNER_B BOUND_OF(NK, nk)

__global__ void prod(int nr, int nc, int nk, DATA_TYPE *X, DATA_TYPE *Y, DATA_TYPE *Z)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	int r = blockIdx.y * blockDim.y + threadIdx.y;
	int p;

	if ((r < ROWS_B) && (c < COLS_B))
	{
		Z[r * NC + c] = 0;
		for (p = 0; p < INNER_B; p++)
		{
			Z[r * NC + c] += X[r * NK + p] * Y[p * NC + c];
		}
	}
}

__global__ void rowdot(int nr, int nc, DATA_TYPE *M, DATA_TYPE *v, DATA_TYPE *w)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	int c;
	if (r < ROWS_B)
	{
		w[r] = 0;
		for (c = 0; c < COLS_B; c++)
		{
			w[r] += M[r * NC + c] * v[c];
		}
	}
}

__global__ void maskdot(int nr, int nc, DATA_TYPE *M, DATA_TYPE *v, DATA_TYPE *w)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	int c;
	if (r < ROWS_B)
	{
		w[r] = 0;
		for (c = 0; c < COLS_B; c++)
		{
			if (M[r * NC + c] != 0)
			{
				w[r] += M[r * NC + c] * v[c];
			}
		}
	}
}

__global__ void colsum(int nr, int nc, DATA_TYPE *M, DATA_TYPE *s)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	int r;
	if (c < COLS_B)
	{
		s[c] = 0;
		for (r = 0; r < ROWS_B; r++)
		{
			s[c] += M[r * NC + c];
		}
	}
}

__global__ void relax(int nr, int nc, DATA_TYPE *u, DATA_TYPE *v)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;

	if ((y > 0) && (y < ROWS_B - 1) && (x > 0) && (x < COLS_B - 1))
	{
		v[y * NC + x] = 0.2f * (u[y * NC + x] + u[y * NC + (x - 1)] + u[y * NC + (x + 1)]
		                      + u[(y - 1) * NC + x] + u[(y + 1) * NC + x]);
	}
}

/* Z = alpha * X Y + beta * Z: the scaled product, accumulated in the output itself. */
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

__global__ void turn(int nc, DATA_TYPE *G)
{
	int ring = blockIdx.x * blockDim.x + threadIdx.x;
	int k, lo, hi, back;
	DATA_TYPE keep;
	if (ring < COLS_B / 2)
	{
		lo = ring;
		hi = COLS_B - 1 - ring;
		for (k = lo; k < hi; k++)
		{
			back = hi - (k - lo);
			keep = G[lo * NC + k];
			G[lo * NC + k] = G[back * NC + lo];
			G[back * NC + lo] = G[hi * NC + back];
			G[hi * NC + back] = G[k * NC + hi];
			G[k * NC + hi] = keep;
		}
	}
}

__global__ void nearest(int nr, int nc, DATA_TYPE *P, DATA_TYPE *C, DATA_TYPE *s, int *at)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	int j, k, pick;
	DATA_TYPE d, t, best;
	if (i < ROWS_B)
	{
		best = 3.0e38f;
		pick = -1;
		for (j = 0; j < COLS_B; j++)
		{
			d = 0;
			for (k = 0; k < 16; k++)
			{
				t = P[i * 16 + k] - C[j * 16 + k];
				d += t * t;
			}
			if (d < best)
			{
				best = d;
				pick = j;
			}
		}
		s[i] = best;
		at[i] = pick;
	}
}

int main(void)
{
	DATA_TYPE *X, *Y, *Z, *v, *w;
	cudaMalloc((void **)&X, sizeof(DATA_TYPE) * NR * NK);
	cudaMalloc((void **)&Y, sizeof(DATA_TYPE) * NK * NC);
	cudaMalloc((void **)&Z, sizeof(DATA_TYPE) * NR * NC);
	cudaMalloc((void **)&v, sizeof(DATA_TYPE) * NC);
	cudaMalloc((void **)&w, sizeof(DATA_TYPE) * NR);
	int *lab;
	cudaMalloc((void **)&lab, sizeof(int) * NR);
	dim3 block(32, 8);
	dim3 grid((size_t)(ceil(((float)NC) / ((float)block.x))), (size_t)(ceil(((float)NR) / ((float)block.y))));
	dim3 rows((size_t)(ceil(((float)NR) / ((float)block.x))), 1);
	dim3 cols((size_t)(ceil(((float)NC) / ((float)block.x))), 1);
	dim3 rings((size_t)(ceil(((float)(NC / 2)) / ((float)block.x))), 1);
	prod<<<grid, block>>>(NR, NC, NK, X, Y, Z);
	rowdot<<<rows, block>>>(NR, NC, X, v, w);
	maskdot<<<rows, block>>>(NR, NC, X, v, w);
	colsum<<<cols, block>>>(NR, NC, X, w);
	relax<<<grid, block>>>(NR, NC, Z, X);
	scaled<<<grid, block>>>(NR, NC, NK, 1.5f, 0.5f, X, Y, Z);
	turn<<<rings, block>>>(NC, X);
	nearest<<<rows, block>>>(NR, NC, X, Y, w, lab);
	cudaDeviceSynchronize();
	printf("done\n");
	return 0;
}
