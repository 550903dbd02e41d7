"""An application that launches one kernel from one site in a loop over block sizes (64, 128 and 256 threads), and
what a capture of it writes in mep.yaml: `launch.observed`, the configurations CUPTI saw. Shared by the patch and
optimize tests of observed launches and the GPU capture test."""

# each block reverses its own threads' values: what a launch computes depends on its block
APP = """#include <cstdio>
__global__ void mirror(float* out, const float* in)
{
    unsigned at = blockDim.x * blockIdx.x + threadIdx.x;
    out[at] = in[blockDim.x * blockIdx.x + blockDim.x - threadIdx.x - 1];
}

int main()
{
    const int total = 1 << 20;
    float *in, *out;
    cudaMalloc(&in, total * sizeof(float));
    cudaMalloc(&out, total * sizeof(float));
    for (int threads = 64; threads <= 256; threads *= 2)
        mirror<<<total / threads, threads>>>(out, in);
    cudaDeviceSynchronize();
    printf("done\\n");
    return 0;
}
"""

# the three launches of the loop, as a capture writes them
OBSERVED = ("observed: [{grid: [16384, 1, 1], block: [64, 1, 1], launches: 1}, "
            "{grid: [8192, 1, 1], block: [128, 1, 1], launches: 1}, {grid: [4096, 1, 1], block: [256, 1, 1], launches: 1}]")


def with_observed(mep_yaml: str) -> str:
    """A static MEP's mep.yaml of `mirror` with the loop's three launches observed, as a capture would add them."""
    line = next(ln for ln in mep_yaml.splitlines() if ln.startswith("launch: {"))
    return mep_yaml.replace(line, line[:-1] + ", " + OBSERVED + "}")
