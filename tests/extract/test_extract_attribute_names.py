"""A namespace constant that the kernel's declaration names outside its body (`__launch_bounds__(W, SMEM / (W *
64))`), where libclang shows no cursor, is in the kernel's closure: the MEP's kernel.cu defines it, so it builds."""
from __future__ import annotations

from mep_apps import make_app, run


def test_a_constant_in_launch_bounds_is_copied(tmp_path):
    app = make_app(tmp_path, """
        namespace img {
        const int SMEM_BYTES = 32 * 1024;
        const int UNUSED_BYTES = 7;
        template <int W>
        __launch_bounds__(W, SMEM_BYTES / (W * 64))
        __global__ void brighten(float* v, int n)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] += 1.f; }
        }
        int main() { float* v; cudaMalloc(&v, 999 * sizeof(float)); img::brighten<128><<<8, 128>>>(v, 999); return 0; }
    """)
    r = run("img::brighten", "-C", app)
    assert r.exit_code == 0, r.output
    kernel = (app / ".mepgen" / "meps" / "img.brighten" / "kernel.cu").read_text()
    assert "const int SMEM_BYTES = 32 * 1024;" in kernel
    assert "UNUSED_BYTES" not in kernel
