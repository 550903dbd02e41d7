"""Element counts and launch configurations derived the way real applications write them: a header the parse
cannot find before the code, function-like macros in a launch, buffers made by an allocating helper or kept as
members of a class, template parameters of the launching function, `sizeof` of the application's own types.
Each MEP is cut from a small application of our own (`make_app`); what cannot be derived stays a todo."""
from __future__ import annotations

from mepgen.spec import load_spec
from mep_apps import make_app, run


def _spec(app, kernel):
    r = run(kernel, "-C", app)
    assert r.exit_code in (0, 3), r.output
    return load_spec(app / ".mepgen" / "meps" / kernel / "mep.yaml")


def _fields(spec):
    return {t.field for t in spec.todo}


def test_a_missing_header_does_not_hide_the_allocations_after_it(tmp_path):
    """A header the parse does not have (a library's, say) is a fatal error for clang, which then stops
    instantiating templates: `cudaMalloc(&d, bytes)` on an `int*` (the template overload) became an invalid
    expression and the buffer's count a todo."""
    app = make_app(tmp_path, """
        #include <somelib/not_installed_here.h>
        #define LEN 5000
        __global__ void twice(int* out, const int* in, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            out[i] = 2 * in[i];                   // no bound check: only the allocations tell the counts
        }
        int main()
        {
            int *d_in, *d_out;
            cudaMalloc(&d_in, LEN * sizeof(int));
            cudaMalloc(&d_out, (LEN + 1) * sizeof(int));   // one spare element
            twice<<<(LEN + 127) / 128, 128>>>(d_out, d_in, LEN);
            return 0;
        }
    """)
    s = _spec(app, "twice")
    assert s.param("in").count == "LEN" and s.param("out").count == "LEN + 1"
    assert not any(f.endswith(".count") for f in _fields(s))


def test_function_like_macros_in_a_launch_and_an_allocation_are_expanded(tmp_path):
    """`<<<CEIL_DIV(n, TPB), TPB>>>` with n a local of main set from constants, and a byte count written with
    another macro: expanded as the preprocessor does, then followed like any expression."""
    app = make_app(tmp_path, """
        #define TPB 64
        #define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
        #define PADDED(x) CEIL_DIV(x, 32) * 32
        __global__ void scale(float* v, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            v[i] *= 2.0f;
        }
        int main()
        {
            int rows = 300, cols = 7;
            int n = rows * cols;
            float* d_v;
            cudaMalloc((void**)&d_v, PADDED(n) * sizeof(float));
            scale<<<CEIL_DIV(n, TPB), TPB>>>(d_v, n);
            return 0;
        }
    """)
    s = _spec(app, "scale")
    assert "launch" not in _fields(s)
    assert s.launch.block == ["TPB"]
    from mepgen import cexpr
    sizes = {**s.sizes, "TPB": 64}
    assert cexpr.evaluate(s.launch.grid[0], sizes) == (2100 + 63) // 64
    assert cexpr.evaluate(s.param("v").count, sizes) == (2100 + 31) // 32 * 32


def test_a_launch_macro_given_namespace_constants(tmp_path):
    """`call_kernel(k, n_blocks, n_threads)` expanding to `k<<<nb, nt>>>()`: the grid and block come as the
    macro's argument tokens, names of namespace-scope constants whose initializers use other macros. They are
    followed like the constants of a direct launch; a parameter named like one of them elsewhere in the file is
    not what they mean."""
    app = make_app(tmp_path, """
        #define kmin(x, y) ((x < y) ? x : y)
        #define call_kernel(k, nb, nt) k<<<nb, nt>>>()
        const int n = 1 << 10;
        const int n_threads = kmin(n, 64);
        const int n_blocks = n / n_threads;
        __device__ int marks[1 << 10];
        __global__ void mark() { int i = blockIdx.x * blockDim.x + threadIdx.x; marks[i] = i; }
        void unrelated(int n, int n_threads) { (void)n; (void)n_threads; }
        int main()
        {
            call_kernel(mark, n_blocks, n_threads);
            return 0;
        }
    """)
    s = _spec(app, "mark")
    assert "launch" not in _fields(s)
    from mepgen import cexpr
    assert cexpr.evaluate(s.launch.grid[0], s.sizes) == 16 and cexpr.evaluate(s.launch.block[0], s.sizes) == 64


def test_a_variadic_macro_in_a_launch_stays_a_todo(tmp_path):
    """A macro mepgen does not expand (variadic) leaves the launch underived: a todo, never a guess."""
    app = make_app(tmp_path, """
        #define FIRST(a, ...) (a)
        __global__ void fill(float* v) { v[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }
        int main()
        {
            float* d_v;
            cudaMalloc((void**)&d_v, 4096 * sizeof(float));
            fill<<<FIRST(16, 2, 3), 256>>>(d_v);
            return 0;
        }
    """)
    s = _spec(app, "fill")
    assert "launch" in _fields(s)


_UNGUARDED = """
    __global__ void add(float* out, const float* a, const float* b)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        out[i] = a[i] + b[i];                 // no bound check: only the allocations tell the counts
    }
"""


def test_buffers_from_allocating_helpers(tmp_path):
    """A helper that returns the buffer it allocates (a template, its size a parameter), one that allocates
    through its pointer parameter, and a buffer assigned after its declaration: each count is the helper's
    byte count with its parameters bound to the call's arguments."""
    app = make_app(tmp_path, _UNGUARDED + """
        #define CELLS 6000
        template <typename T> T* device_array(int len)
        {
            T* p;
            cudaMalloc((void**)&p, sizeof(T) * len);
            return p;
        }
        void make(float** where, int len) { cudaMalloc((void**)where, len * sizeof(float)); }
        void step(float* out, const float* a, const float* b, int n) { add<<<n / 128, 128>>>(out, a, b); }
        int main()
        {
            float* a = device_array<float>(CELLS * 3);
            float* b;
            make(&b, CELLS * 2);
            float* out;
            out = device_array<float>(CELLS);
            step(out, a, b, CELLS);
            return 0;
        }
    """)
    s = _spec(app, "add")
    assert [s.param(n).count.replace(" ", "") for n in ("out", "a", "b")] == ["CELLS", "CELLS*3", "CELLS*2"]
    assert not any(f.endswith(".count") for f in _fields(s))


def test_buffers_kept_as_members_or_in_an_array(tmp_path):
    """Buffers that are members of a class, allocated in its constructor from the constructor's parameter, and
    two buffers of a small array allocated alike (ping-pong): counts from those allocations. Two elements
    allocated with different sizes are not chosen between: that count stays a todo. The arrays reach the launch
    through parameters of another function."""
    app = make_app(tmp_path, _UNGUARDED + """
        struct Solver {
            float* a; float* b; float* out; int n;
            Solver(int len) : n(len)
            {
                cudaMalloc(&a, len * sizeof(float));
                cudaMalloc(&b, len * sizeof(float));
                cudaMalloc(&this->out, 2 * len * sizeof(float));
            }
            void run() { add<<<n / 64, 64>>>(out, a, b); }
        };
        __global__ void copy(float* dst, const float* src) { dst[threadIdx.x] = src[threadIdx.x]; }
        void sweep(float* pair[2], float** other, int steps)
        {
            int src = 0;
            for (int t = 0; t < steps; t++) {
                copy<<<1, 256>>>(pair[1 - src], other[src]);
                src = 1 - src;
            }
        }
        int main()
        {
            Solver s(4096);
            s.run();
            float* buf[2];
            float* odd[2];
            cudaMalloc(&buf[0], 512 * sizeof(float));
            cudaMalloc(&buf[1], 512 * sizeof(float));
            cudaMalloc(&odd[0], 512 * sizeof(float));
            cudaMalloc(&odd[1], 256 * sizeof(float));
            sweep(buf, odd, 4);
            return 0;
        }
    """)
    s = _spec(app, "add")
    assert [s.param(n).count.replace(" ", "") for n in ("out", "a", "b")] == ["2*4096", "4096", "4096"]
    assert not any(f.endswith(".count") for f in _fields(s))
    c = _spec(app, "copy")
    assert c.param("dst").count == "512"
    assert "params[1].count" in _fields(c)          # odd[0] and odd[1] disagree: no count chosen
    why = next(t.reason for t in c.todo if t.field == "params[1].count")
    assert "allocated in 2 places with different sizes" in why and "512" in why and "256" in why


def test_sizeof_of_the_applications_own_types(tmp_path):
    """`sizeof(Pair)` in a launch, `sizeof(real)` (a typedef) and `sizeof(*q)` (of an expression) in byte counts:
    the MEP's size arithmetic has no such types or variables, so their sizes are the ones clang computes."""
    app = make_app(tmp_path, """
        #define N 8192
        struct Pair { double lo, hi; };
        typedef float real;
        __global__ void lows(real* v, const Pair* q)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            v[i] = (real)q[i].lo;
        }
        int main()
        {
            real* v;
            Pair* q;
            cudaMalloc(&v, N * sizeof(real));
            cudaMalloc(&q, N * sizeof(*q));
            const int per_block = 512 / sizeof(Pair);
            lows<<<N / per_block, per_block>>>(v, q);
            return 0;
        }
    """)
    s = _spec(app, "lows")
    assert "launch" not in _fields(s) and not any(f.endswith(".count") for f in _fields(s))
    from mepgen import cexpr
    assert cexpr.evaluate(s.launch.grid[0], s.sizes) == 8192 // 32
    assert cexpr.evaluate(s.launch.block[0], s.sizes) == 32
    assert s.param("v").count == "N"
    assert cexpr.evaluate(s.param("q").count, s.sizes) == 8192 * 2      # Pair records kept as 2 doubles each


def test_sizeof_of_a_variable_inside_a_macro_argument(tmp_path):
    """`CHECK(cudaMalloc(&p, n * sizeof(*p)))`: the call sits in a macro argument, read from its tokens; the
    operand of sizeof is a variable's type, never its value."""
    app = make_app(tmp_path, """
        #define CHECK(call) do { if ((call) != 0) return 1; } while (0)
        __global__ void half(short* v) { v[blockIdx.x * blockDim.x + threadIdx.x] /= 2; }
        int main()
        {
            const int n = 1 << 14;
            short* v;
            CHECK(cudaMalloc(&v, n / 2 * sizeof(*v)));
            half<<<n / 2 / 128, 128>>>(v);
            return 0;
        }
    """)
    s = _spec(app, "half")
    from mepgen import cexpr
    assert not any(t.field.endswith(".count") for t in s.todo)
    assert cexpr.evaluate(s.param("v").count, s.sizes) == (1 << 13)


def test_a_template_parameter_of_the_launching_function(tmp_path):
    """The launch and the allocation are written with the launching function's template parameter: its
    argument in the first instantiation main calls, stated in the notes (the other one is named)."""
    app = make_app(tmp_path, """
        __global__ void prefix(int* out, const int* in) { out[threadIdx.x] = in[threadIdx.x] + 1; }
        template <int WIDTH>
        void run(int reps)
        {
            int *d_in, *d_out;
            cudaMalloc((void**)&d_in, WIDTH * sizeof(int));
            cudaMalloc((void**)&d_out, WIDTH * sizeof(int));
            for (int r = 0; r < reps; r++) prefix<<<1, WIDTH>>>(d_out, d_in);
        }
        int main() { run<128>(3); run<256>(3); return 0; }
    """)
    s = _spec(app, "prefix")
    assert "launch" not in _fields(s) and not any(f.endswith(".count") for f in _fields(s))
    assert s.launch.block == ["128"] and s.param("in").count == "128" and s.param("out").count == "128"
    notes = (app / ".mepgen" / "meps" / "prefix" / "mep.yaml").read_text()
    assert "template argument 128 of run()" in notes and "others: 256" in notes


def test_a_grid_assigned_in_an_earlier_loop_and_again_before_the_launch(tmp_path):
    """Two sweeps share one dim3: the first loop's assignments are overwritten by the second loop's own
    before its launch, whose grid is then derived (the loop's first iteration, stated). A grid member only
    the earlier loop sets stays unsure: a todo."""
    app = make_app(tmp_path, """
        #define TILES 40
        __global__ void sweep_a(float* m, int i) { m[blockIdx.x * 16 + threadIdx.x] += i; }
        __global__ void sweep_b(float* m, int i) { m[blockIdx.x * 16 + threadIdx.x] -= i; }
        __global__ void sweep_c(float* m, int i) { m[blockIdx.x * 16 + threadIdx.x] *= i; }
        int main()
        {
            float* d_m;
            cudaMalloc(&d_m, TILES * TILES * 16 * sizeof(float));
            dim3 grid;
            dim3 block(16, 1);
            for (int i = 1; i <= TILES; i++) {
                grid.x = i;
                grid.y = 1;
                sweep_a<<<grid, block>>>(d_m, i);
            }
            for (int i = TILES - 1; i >= 1; i--) {
                grid.x = i;
                grid.y = 1;
                sweep_b<<<grid, block>>>(d_m, i);
            }
            for (int i = 0; i < 3; i++)
                grid.y = 2 + i;
            sweep_c<<<grid, block>>>(d_m, 2);
            return 0;
        }
    """)
    s = _spec(app, "sweep_b")
    assert "launch" not in _fields(s)
    from mepgen import cexpr
    assert [cexpr.evaluate(e, s.sizes) for e in s.launch.grid] == [39, 1, 1]
    c = _spec(app, "sweep_c")
    assert "launch" in _fields(c)
    assert "in a loop before the launch" in next(t.reason for t in c.todo if t.field == "launch")


def test_names_written_inside_a_macro_that_calls_the_launcher_keep_their_values(tmp_path):
    """`#define RUN(v) run(v, d, LEN)` calls the launching function: its arguments are the values of the names
    the macro's body writes, not the invocation expanded again."""
    app = make_app(tmp_path, """
        #define LEN 3000
        #define RUN(v) run(v, d, len)
        __global__ void put(float* d, float v) { d[blockIdx.x * blockDim.x + threadIdx.x] = v; }
        void run(float v, float* d, int n) { put<<<n / 100, 100>>>(d, v); }
        int main()
        {
            const int len = LEN;
            float* d;
            cudaMalloc(&d, len * sizeof(float));
            RUN(1.5f);
            RUN(2.5f);
            return 0;
        }
    """)
    s = _spec(app, "put")
    assert not any(t.field == "launch" or t.field.endswith(".count") for t in s.todo)
    assert s.launch.grid == ["LEN / 100"] and s.param("d").count == "LEN"


def test_a_pointer_into_a_buffer_counts_to_the_buffers_end(tmp_path):
    """`d + rows * 2` passed to a kernel: the elements from there to the end of d's allocation."""
    app = make_app(tmp_path, """
        __global__ void neg(double* v) { v[blockIdx.x * blockDim.x + threadIdx.x] *= -1.0; }
        int main()
        {
            const int rows = 64, cols = 32;
            double* d;
            cudaMalloc(&d, rows * cols * sizeof(double));
            double* tail = d + rows * 2;
            neg<<<(rows * cols - rows * 2) / 64, 64>>>(tail);
            return 0;
        }
    """)
    s = _spec(app, "neg")
    from mepgen import cexpr
    assert not any(t.field.endswith(".count") for t in s.todo)
    assert cexpr.evaluate(s.param("v").count, s.sizes) == 64 * 32 - 128


def test_two_programs_in_one_folder_each_with_its_own_main(tmp_path):
    """A folder of two programs (float and double variants, each with a `main`): the buffer assigned in the
    second program's main is followed in that main, not in the first one's. (Each launches from a function of
    its own: a launch written in a second `main` is not found, the project knowing one `main`.)"""
    from mepgen.extract import ExtractOptions, extract
    app = make_app(tmp_path, """
        __global__ void fill_f(float* v) { v[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }
        float* make_f(int n) { float* p; cudaMalloc((void**)&p, n * sizeof(float)); return p; }
        void go_f(float* v) { fill_f<<<10, 100>>>(v); }
        int main() { float* v; v = make_f(1000); go_f(v); return 0; }
    """)
    (app / "src" / "k_double.cu").write_text("""
        __global__ void fill_d(double* v) { v[blockIdx.x * blockDim.x + threadIdx.x] = 1.0; }
        double* make_d(int n) { double* p; cudaMalloc((void**)&p, n * sizeof(double)); return p; }
        void go_d(double* v) { fill_d<<<20, 100>>>(v); }
        int main() { double* v; v = make_d(2000); go_d(v); return 0; }
    """)
    extract(app, ExtractOptions(jobs=1))
    assert _spec(app, "fill_f").param("v").count == "1000"
    d = _spec(app, "fill_d")
    assert d.param("v").count == "2000" and not d.todo


def test_an_underivable_count_says_why(tmp_path):
    """A buffer from a function mepgen cannot read (declared only): its count stays a todo whose reason says
    so. One whose bytes come from a value read from a file is counted over that value's size symbol, which
    is the todo (with its own reason). One allocated with a size mepgen does not follow (a container's size())
    says where and with what.""" 
    app = make_app(tmp_path, """
        #include <cstdio>
        #include <vector>
        float* library_buffer(int n);
        __global__ void twice(float* a, float* b, float* c)
        {
            int i = threadIdx.x;
            a[i] *= 2.0f; b[i] *= 2.0f; c[i] *= 2.0f;
        }
        int main(int argc, char** argv)
        {
            FILE* f = fopen(argv[1], "rb");
            long bytes = 0;
            fread(&bytes, sizeof(long), 1, f);
            float* a = library_buffer(64);
            float* b;
            cudaMalloc((void**)&b, bytes);
            std::vector<float> host(64);
            float* c;
            cudaMalloc((void**)&c, host.size() * sizeof(float));
            twice<<<1, 64>>>(a, b, c);
            return 0;
        }
    """)
    s = _spec(app, "twice")
    reasons = {t.field: t.reason for t in s.todo}
    assert "found no allocation of it it can follow" in reasons["params[0].count"]
    assert "params[1].count" not in reasons and "sizes.BYTES" in reasons      # b: BYTES / 4, BYTES a todo
    assert "BYTES" in s.param("b").count
    assert "allocated at src/k.cu:20 with `host.size() * sizeof(float)` bytes, which mepgen could not " \
        "trace to a value" in reasons["params[2].count"]


def test_a_launch_from_run_time_data_stays_a_todo_naming_what_was_not_traced(tmp_path):
    """A grid computed from a container's contents (known only while the program runs): a launch todo whose
    reason quotes the grid as written."""
    app = make_app(tmp_path, """
        #include <vector>
        __global__ void level(int* v) { v[blockIdx.x * blockDim.x + threadIdx.x] += 1; }
        void run(int* d, const std::vector<int>& ends)
        {
            for (size_t i = 1; i < ends.size(); i++)
                level<<<ends[i] - ends[i - 1], 32>>>(d);
        }
    """)
    s = _spec(app, "level")
    why = next(t.reason for t in s.todo if t.field == "launch")
    assert "could not be traced to sizes (`ends[i] - ends[i - 1]`)" in why


def test_a_sum_factor_of_a_byte_count_keeps_its_parentheses():
    """`w * (x + 1) * sizeof(float)` holds w * (x + 1) elements, never w * x + 1."""
    from mepgen import cexpr
    from mepgen.mep.counts import count_from_bytes
    count = count_from_bytes("W * (X + 1) * sizeof(float)", 4)
    assert cexpr.evaluate(count, {"W": 10, "X": 7}) == 80
    assert count_from_bytes("NUM * (sizeof(int))", 4) == "NUM"
    assert count_from_bytes("n * 32", 32) == "n"
