"""Kernel templates launched the way real applications write them: arguments deduced by C++ from the buffers'
types (`k<<<g, b>>>(d_x, n)` with `template <typename T> __global__ void k(T*, int)`), launches inside a function
template that main instantiates, and templates calling templates. The MEP instantiates the kernel with the
arguments C++ would pick; what mepgen cannot derive is a launch todo, never a guessed type."""
from __future__ import annotations

from mepgen.spec import load_spec
from mep_apps import make_app, run


def _spec(app, kernel):
    r = run(kernel, "-C", app)
    assert r.exit_code in (0, 3), r.output
    return load_spec(app / ".mepgen" / "meps" / kernel / "mep.yaml")


_KERNEL = """
    #define LEN 3000
    template <typename V>
    __global__ void halve(V* data, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) data[i] = data[i] / 2;
    }
"""


def test_an_argument_deduced_from_the_buffer_type_in_main(tmp_path):
    app = make_app(tmp_path, _KERNEL + """
        int main()
        {
            double* d;
            cudaMalloc(&d, LEN * sizeof(double));
            halve<<<(LEN + 127) / 128, 128>>>(d, LEN);
            return 0;
        }
    """)
    s = _spec(app, "halve")
    assert s.todo == []
    assert s.launch.callee == "halve<double>"
    assert s.param("data").dtype == "float64" and s.param("data").count == "LEN"


def test_a_launch_inside_a_function_template_takes_mains_instantiation(tmp_path):
    """The launch is dependent (`V*` of the launching template): no specialisation exists in the AST, so the
    kernel's V is matched against the argument's type and the enclosing template's parameter replaced by the
    argument main instantiates it with."""
    app = make_app(tmp_path, _KERNEL + """
        template <typename E>
        void driver(int reps)
        {
            E* buf;
            cudaMalloc(&buf, LEN * sizeof(E));
            for (int r = 0; r < reps; r++)
                halve<<<(LEN + 255) / 256, 256>>>(buf, LEN);
            cudaFree(buf);
        }
        int main() { driver<int>(3); return 0; }
    """)
    s = _spec(app, "halve")
    assert s.launch.callee == "halve<int>"
    assert s.param("data").dtype == "int32"
    assert s.todo == []


def test_a_template_calling_a_template_with_written_arguments(tmp_path):
    """`driver<E, 128>` called from `outer<E>`'s body, which main instantiates with float: E is followed
    through both templates, and the kernel's written `<E, B>` becomes `<float, 128>`."""
    app = make_app(tmp_path, """
        #define LEN 4096
        template <typename V, int B>
        __global__ void blocked(V* data, int n)
        {
            int i = blockIdx.x * B + threadIdx.x;
            if (i < n) data[i] += 1;
        }
        template <typename E, int B>
        void driver(E* buf) { blocked<E, B><<<LEN / B, B>>>(buf, LEN); }
        template <typename E>
        void outer()
        {
            E* buf;
            cudaMalloc(&buf, LEN * sizeof(E));
            driver<E, 128>(buf);
        }
        int main() { outer<float>(); return 0; }
    """)
    s = _spec(app, "blocked")
    assert s.launch.callee == "blocked<float, 128>"
    assert s.param("data").dtype == "float32"


def test_an_argument_nothing_derives_is_a_launch_todo(tmp_path):
    """The launching template is never instantiated in the sources mepgen read: the kernel's type parameter is
    unknown, which is a launch todo (mepgen's to derive), not a type to capture from a run."""
    app = make_app(tmp_path, _KERNEL + """
        template <typename E>
        void driver(E* buf) { halve<<<(LEN + 255) / 256, 256>>>(buf, LEN); }
        int main() { return 0; }
    """)
    s = _spec(app, "halve")
    assert s.launch.callee == "halve"
    kinds = {t.field: t.kind for t in s.todo}
    assert kinds.get("launch") == "launch" and "template argument" in next(
        t.reason for t in s.todo if t.field == "launch")
    assert kinds.get("params[0].dtype") == "launch"


def test_a_local_constant_argument_is_its_value_and_a_functor_type_is_copied(tmp_path):
    """`stepper<THREADS><<<...>>>(rule, buf)` in a template: THREADS is a local constant of the launching
    function (its value goes into the MEP), Rule is deduced as the app's `Halving`, a type the kernel names only
    through its parameter: main's `driver(Halving())` instantiates the launching template with it, so the
    extraction copies its definition into the MEP's kernel.cu and the MEP builds as the application does."""
    app = make_app(tmp_path, """
        #define LEN 2048
        struct Halving { __device__ float operator()(float x) const { return 0.5f * x; } };
        template <int B>
        __global__ void widen(float* data, int n)
        {
            int i = blockIdx.x * B + threadIdx.x;
            if (i < n) data[i] *= 2.0f;
        }
        template <int B, typename Rule>
        __global__ void stepper(Rule rule, float* data, int n)
        {
            int i = blockIdx.x * B + threadIdx.x;
            if (i < n) data[i] = rule(data[i]);
        }
        template <typename Rule>
        void driver(Rule rule)
        {
            const int THREADS = 128;
            float* buf;
            cudaMalloc(&buf, LEN * sizeof(float));
            widen<THREADS><<<LEN / THREADS, THREADS>>>(buf, LEN);
            stepper<THREADS><<<LEN / THREADS, THREADS>>>(rule, buf, LEN);
        }
        int main() { driver(Halving()); return 0; }
    """)
    s = _spec(app, "widen")
    assert s.launch.callee == "widen<128>" and s.todo == []
    t = _spec(app, "stepper")
    assert t.launch.callee == "stepper<128, Halving>"
    assert not [x for x in t.todo if x.field == "launch"]
    assert "struct Halving" in (app / ".mepgen" / "meps" / "stepper" / "kernel.cu").read_text()


def test_a_type_local_to_main_is_copied_with_the_kernel(tmp_path):
    """The launching template is instantiated with a type local to main: the extraction copies its definition
    to the MEP's file scope with the kernel, and the MEP instantiates the kernel with it."""
    app = make_app(tmp_path, """
        #define LEN 2048
        template <typename Rule>
        __global__ void stepper(Rule rule, float* data, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) data[i] = rule(data[i]);
        }
        template <typename Rule>
        void driver(Rule rule)
        {
            float* buf;
            cudaMalloc(&buf, LEN * sizeof(float));
            stepper<<<LEN / 128, 128>>>(rule, buf, LEN);
        }
        int main()
        {
            struct Tripling { __device__ float operator()(float x) const { return 3.0f * x; } };
            driver(Tripling());
            return 0;
        }
    """)
    t = _spec(app, "stepper")
    assert t.launch.callee == "stepper<Tripling>"
    assert "struct Tripling" in (app / ".mepgen" / "meps" / "stepper" / "kernel.cu").read_text()


def test_a_launching_template_instantiated_explicitly(tmp_path):
    """`template void driver<double>(int);` (an explicit instantiation, as a library compiled for several types
    writes it) when no call the sources show names the type: the kernel is instantiated with double."""
    app = make_app(tmp_path, _KERNEL + """
        template <typename E>
        void driver(int reps)
        {
            E* buf;
            cudaMalloc(&buf, LEN * sizeof(E));
            for (int r = 0; r < reps; r++)
                halve<<<(LEN + 255) / 256, 256>>>(buf, LEN);
        }
        template void driver<double>(int);
        int main() { return 0; }
    """)
    s = _spec(app, "halve")
    assert s.launch.callee == "halve<double>" and s.param("data").dtype == "float64"


def test_buffers_and_a_grid_helper_inside_a_function_template(tmp_path):
    """In `template <typename T> void contract(int n)`: `cudaMalloc(&d, count * sizeof(T))` is a dependent call
    (libclang leaves its callee unresolved and its spelling empty) and `sizeof(T)` has no value until T is known;
    the grid comes from a helper written `if (a % b == 0) return a / b; return a / b + 1;`. With main's
    `contract<float>(...)`, the counts, the element type and the grid are all derived."""
    app = make_app(tmp_path, """
        #define ROWS 96
        int blocks_for(int a, int b)
        {
            if (a % b == 0)
                return a / b;
            return a / b + 1;
        }
        template <typename T>
        __global__ void scale_rows(const T* in, T* out, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = 3 * in[i];
        }
        template <typename T>
        void contract(int cols)
        {
            const size_t count = (size_t)ROWS * cols;
            const size_t bytes = count * sizeof(T);
            T *in, *out;
            cudaMalloc(&in, bytes);
            cudaMalloc(&out, bytes);
            dim3 grid(blocks_for(ROWS * cols, 128));
            scale_rows<<<grid, 128>>>(in, out, ROWS * cols);
        }
        int main() { contract<float>(50); return 0; }
    """)
    s = _spec(app, "scale_rows")
    assert s.todo == [], [(t.field, t.reason) for t in s.todo]
    assert s.launch.callee == "scale_rows<float>" and s.param("out").dtype == "float32"
    assert "ROWS" in s.param("in").count and "sizeof" not in s.param("in").count
    from mepgen import cexpr
    assert cexpr.evaluate(s.launch.grid[0], s.sizes) == (96 * 50 + 127) // 128


def test_a_variadic_launching_template_is_no_internal_error(tmp_path):
    """`template <typename... Args> void apply(Args... args)` called from main: the call's template argument is
    a pack, a kind libclang's binding does not name (it raised ValueError: exit 70 on a real application)."""
    app = make_app(tmp_path, _KERNEL + """
        template <typename E, typename... Rest>
        void apply(E* buf, Rest... rest) { halve<<<(LEN + 255) / 256, 256>>>(buf, LEN); }
        int main() { float* d; cudaMalloc(&d, LEN * sizeof(float)); apply(d, 1, 2.0); return 0; }
    """)
    s = _spec(app, "halve")
    assert s.param("data").count == "LEN"
