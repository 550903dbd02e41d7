"""A kernel reading a variable template in constant or device memory (`template <typename V> __constant__ V w[K];`):
the closure copies the template into kernel.cu, and the MEP fills the instantiation its launch reads."""
from __future__ import annotations

import json
import subprocess

import pytest

from mepgen import mepbuild
from mepgen.spec import load_spec
from mep_apps import make_app, run

SMOOTH = """
    #define WIDTH 3
    #define LEN (1 << 16)
    template <typename V>
    __constant__ V weights[WIDTH];

    template <typename V>
    __global__ void smooth(const V* src, V* dst, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < 1 || i >= n - 1) return;
        V acc = 0;
        for (int k = 0; k < WIDTH; k++) acc += src[i - 1 + k] * weights<V>[k];
        dst[i] = acc;
    }

    template <typename V>
    void smooth_on_device(int n)
    {
        const V taps[WIDTH] = {0.25, 0.5, 0.25};
        cudaMemcpyToSymbol(weights<V>, taps, sizeof(taps));
        V *src, *dst;
        cudaMalloc(&src, n * sizeof(V));
        cudaMalloc(&dst, n * sizeof(V));
        smooth<<<n / 128, 128>>>(src, dst, n);
    }

    int main() { smooth_on_device<float>(LEN); return 0; }
"""


def _spec(app, kernel):
    return load_spec(app / ".mepgen" / "meps" / kernel / "mep.yaml")


def test_the_closure_holds_the_variable_template_and_its_macro(tmp_path):
    app = make_app(tmp_path, SMOOTH)
    inv = json.loads((app / ".mepgen" / "inventory.json").read_text())
    closure = next(k for k in inv["kernels"] if k["name"] == "smooth")["closure"]
    assert [(g["name"], g["space"], g.get("variable_template")) for g in closure["globals"]] \
        == [("weights", "constant", True)]
    assert "WIDTH" in [m["name"] for m in closure["macros"]]


def test_the_mep_fills_the_instantiation_the_launch_reads(tmp_path):
    app = make_app(tmp_path, SMOOTH)
    r = run("smooth", "-C", app)
    assert r.exit_code == 0, r.output
    s = _spec(app, "smooth")
    assert s.todo == []
    (c,) = s.constants
    assert (c.name, c.ctype, c.dtype, c.count) == ("weights<float>", "float[3]", "float32", "3")
    assert c.init.kind == "values" and c.init.args["values"] == [0.25, 0.5, 0.25]
    mep = app / ".mepgen" / "meps" / "smooth"
    kernel_cu = (mep / "kernel.cu").read_text()
    assert "__constant__ V weights[WIDTH];" in kernel_cu and "#define WIDTH 3" in kernel_cu
    assert kernel_cu.index("weights[WIDTH]") < kernel_cu.index("void smooth(")
    assert "cudaMemcpyToSymbolAsync(weights<float>," in (mep / "harness.cu").read_text()
    assert (mep / "data" / "in" / "const.weights.float.npy").exists()


def test_an_ordinary_kernel_reading_one_instantiation(tmp_path):
    app = make_app(tmp_path, """
        template <typename V> __device__ V bias;
        __global__ void shift(double* y, int n)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += bias<double>; }
        int main() { double* y; cudaMalloc(&y, 4096 * sizeof(double)); shift<<<16, 256>>>(y, 4096); return 0; }
    """)
    r = run("shift", "-C", app)
    assert r.exit_code == 0, r.output
    (c,) = _spec(app, "shift").constants
    assert (c.name, c.ctype, c.dtype, c.count) == ("bias<double>", "double", "float64", "1")
    assert "template <typename V> __device__ V bias;" in (app / ".mepgen/meps/shift/kernel.cu").read_text()


def test_a_read_inside_a_device_function_is_a_todo(tmp_path):
    app = make_app(tmp_path, """
        template <typename V> __constant__ V scale[2];
        template <typename V> __device__ V scaled(V x) { return x * scale<V>[0]; }
        template <typename V>
        __global__ void apply(V* y, int n)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = scaled(y[i]); }
        int main() { float* y; cudaMalloc(&y, 4096 * sizeof(float)); apply<<<16, 256>>>(y, 4096); return 0; }
    """)
    r = run("apply", "-C", app)
    assert r.exit_code == 3, r.output
    s = _spec(app, "apply")
    assert [t.field for t in s.todo] == ["constants[0]"] and "device function" in s.todo[0].reason
    assert "scale[2]" in (app / ".mepgen/meps/apply/kernel.cu").read_text()


def test_capture_says_it_cannot_look_up_an_instantiation(tmp_path):
    from mepgen.capture.names import KernelChoice
    from mepgen.capture.plan import make_plan
    from mepgen.errors import MepgenError
    app = make_app(tmp_path, SMOOTH)
    inv = json.loads((app / ".mepgen" / "inventory.json").read_text())
    kernel = next(k for k in inv["kernels"] if k["name"] == "smooth")
    with pytest.raises(MepgenError, match="variable template weights"):
        make_plan(KernelChoice(kernel), tmp_path / "cap", app_root=app)


@pytest.mark.nvcc
def test_the_mep_and_its_pycuda_entry_compile(tmp_path):
    from mepgen.evaluate.cubin import Cubin
    from mepgen.evaluate.pycuda_entry import describe, entry_source
    app = make_app(tmp_path, SMOOTH)
    assert run("smooth", "-C", app).exit_code == 0
    mep = app / ".mepgen" / "meps" / "smooth"
    spec = _spec(app, "smooth")
    built = subprocess.run(mepbuild.nvcc_command(spec, mep, mep / "kernel.cu", mep / "mep"),
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    (tmp_path / "entry.cu").write_text(entry_source(spec, mep / "kernel.cu"))
    cubin = subprocess.run(["nvcc", *mepbuild.build_flags(spec), f"-I{mep}", "-cubin", str(tmp_path / "entry.cu"),
                            "-o", str(tmp_path / "entry.cubin")], capture_output=True, text=True)
    assert cubin.returncode == 0, cubin.stderr
    (c,) = describe(spec, Cubin((tmp_path / "entry.cubin").read_bytes()))["constants"]
    assert (c["name"], c["size"], c["file"]) == ("weights<float>", 12, "const.weights.float")
