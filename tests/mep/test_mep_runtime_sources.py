"""More values of the run, not of the source, said so with the todo kind `runtime` (out of static completion's
scope, completed by `mepgen capture`): a scalar computed with sin/cos from an angle the program takes from its
data, a helper's parameter its caller fills from an element of a host buffer at a loop's index, and a count a
library writes through its address (`cudaGetDeviceCount(&n)`, or a call of a library whose header mepgen does
not carry). The application's own function that stores a constant through the address stays a value."""
from __future__ import annotations

from mepgen.spec import load_spec
from mep_apps import make_app, run

_KERNEL = """
    #include <cmath>
    __global__ void turn(float* v, int n, double c)
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] = (float)(v[i] * c); }
"""


def _todos(app, kernel="turn"):
    run(kernel, "-C", app)
    return load_spec(app / ".mepgen" / "meps" / kernel / "mep.yaml").todo


def test_a_trigonometric_value_of_a_data_angle(tmp_path):
    app = make_app(tmp_path, _KERNEL + """
        int main()
        {
            float* v; double* angles = new double[8];
            cudaMalloc(&v, 1024 * sizeof(float));
            for (int k = 0; k < 8; k++) {
                double a = angles[k] * 3.14159 / 180.0;
                double c = 2.0 * cos(a) + sin(a);
                turn<<<4, 256>>>(v, 1024, c);
            }
            return 0;
        }
    """)
    todo = {t.field: t for t in _todos(app)}
    assert todo["params[2].value"].kind == "runtime", todo["params[2].value"].reason
    assert "element of a host buffer" in todo["params[2].value"].reason


def test_a_parameter_given_an_element_of_the_callers_data(tmp_path):
    app = make_app(tmp_path, _KERNEL + """
        void apply(float* v, double c) { turn<<<4, 256>>>(v, 1024, c); }
        int main()
        {
            float* v; double* times = new double[16];
            cudaMalloc(&v, 1024 * sizeof(float));
            for (int k = 1; k < 16; k++) apply(v, times[k]);
            return 0;
        }
    """)
    todo = {t.field: t for t in _todos(app)}
    assert todo["params[2].value"].kind == "runtime", todo["params[2].value"].reason
    assert "what its caller passes" in todo["params[2].value"].reason


def test_a_count_a_library_writes_through_its_address(tmp_path):
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "bestlib.h").write_text("int pickBest(int devices, int* best);\n")
    app = make_app(tmp_path, _KERNEL + f'\n    #include "{vendor / "bestlib.h"}"\n' + """
        int main()
        {
            int devices = 0, best = 0;
            cudaGetDeviceCount(&devices);
            pickBest(devices, &best);              // a library's function, declared outside the application
            float* v;
            cudaMalloc(&v, 256 * devices * sizeof(float));
            turn<<<devices, 256>>>(v, 256 * best, 0.5);
            return 0;
        }
    """)
    todos = _todos(app)
    reasons = {t.field: (t.kind, t.reason) for t in todos}
    assert any(k == "runtime" and "cudaGetDeviceCount()" in r for k, r in reasons.values()), reasons
    assert any(k == "runtime" and "pickBest()" in r for k, r in reasons.values()), reasons


def test_the_applications_own_setter_stays_a_value(tmp_path):
    app = make_app(tmp_path, _KERNEL + """
        void choose(int* n) { *n = 2048; }
        int main()
        {
            int n = 0;
            choose(&n);
            float* v;
            cudaMalloc(&v, n * sizeof(float));
            turn<<<(n + 255) / 256, 256>>>(v, n, 0.5);
            return 0;
        }
    """)
    assert _todos(app) == []


def test_a_counter_the_gpu_increments(tmp_path):
    """`__managed__ int kept;` counted up with atomicAdd by one kernel, then the size of the next launch: the GPU
    computed it."""
    app = make_app(tmp_path, _KERNEL + """
        __managed__ int kept;
        __global__ void count(const float* v, int n) { int i = threadIdx.x; if (i < n && v[i] > 0) atomicAdd(&kept, 1); }
        int main()
        {
            float* v;
            cudaMalloc(&v, 4096 * sizeof(float));
            kept = 0;
            count<<<16, 256>>>(v, 4096);
            cudaDeviceSynchronize();
            turn<<<(kept + 255) / 256, 256>>>(v, kept, 0.5);
            return 0;
        }
    """)
    todos = _todos(app)
    assert any(t.kind == "runtime" and "changed by device code, in count()" in t.reason for t in todos), \
        [(t.field, t.kind, t.reason) for t in todos]
