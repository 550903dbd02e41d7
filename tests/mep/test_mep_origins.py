"""Sizes and scalars traced to where they come from: values the code derives (chained assignments, a size
changed after its declaration, a variable a loop changes after the launch, the run script of one program among
several) become values; values the application reads (fscanf, a reading helper, a stream) or gets while it runs
(rand(), a copy back from the GPU) stay todos whose kind says so (`file`, `runtime`), never `placeholder`."""
from __future__ import annotations

import json
import textwrap

from click.testing import CliRunner

from mepgen import cexpr
from mepgen.cli import main
from mepgen.extract import ExtractOptions, extract
from mepgen.spec import load_spec

KERNEL = """
    #include <cstdio>
    #include <cstdlib>
    __global__ void axpy(float* y, const float* x, float a, int n)
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }
"""


def mep(tmp_path, main_src: str, files: dict[str, str] | None = None, sub: str = ""):
    app = tmp_path / "app"
    (app / sub).mkdir(parents=True, exist_ok=True)
    (app / sub / "main.cu").write_text(textwrap.dedent(KERNEL) + textwrap.dedent(main_src))
    for name, text in (files or {}).items():
        (app / name).write_text(textwrap.dedent(text))
    extract(app, ExtractOptions(jobs=1))
    r = CliRunner().invoke(main, ["mep", "axpy", "-C", str(app)])
    assert r.exit_code in (0, 3), r.output
    return load_spec(app / ".mepgen" / "meps" / "axpy" / "mep.yaml"), app


def todo_of(spec, field_start: str):
    found = [t for t in spec.todo if t.field.startswith(field_start)]
    assert found, [(t.field, t.reason) for t in spec.todo]
    return found[0]


def size_of(spec, param: str) -> int:
    return cexpr.evaluate(spec.param(param).value, spec.sizes)


def test_a_size_read_with_fscanf_is_a_file_todo(tmp_path):
    spec, _ = mep(tmp_path, """
        int main(int argc, char** argv) {
            FILE* f = fopen("sizes.txt", "r");
            int n = 16;
            fscanf(f, "%d", &n);
            float *x, *y;
            cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
            axpy<<<(n + 255) / 256, 256>>>(y, x, 2.0f, n);
            return 0;
        }""")
    t = todo_of(spec, "sizes.")
    assert t.kind == "file" and "fscanf" in t.reason, t
    assert 16 not in spec.sizes.values()          # never the value before the read


def test_a_size_a_reading_helper_returns_or_stores_is_a_file_todo(tmp_path):
    spec, _ = mep(tmp_path, """
        static int count_lines(const char* path) {
            FILE* f = fopen(path, "r"); int c = 0; char buf[256];
            while (fgets(buf, sizeof buf, f)) c++;
            fclose(f);
            return c;
        }
        static void load_scale(const char* path, float* a) {
            FILE* f = fopen(path, "r");
            if (f) { fscanf(f, "%f", a); fclose(f); }
        }
        int main(int argc, char** argv) {
            int n = count_lines(argv[1]);
            float a;
            load_scale("scale.txt", &a);
            float *x, *y;
            cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
            axpy<<<(n + 255) / 256, 256>>>(y, x, a, n);
            return 0;
        }""")
    n = todo_of(spec, "sizes.")
    assert n.kind == "file" and "count_lines -> fgets" in n.reason, n
    a = todo_of(spec, "params[2].value")
    assert a.kind == "file" and "load_scale -> fscanf" in a.reason, a


def test_a_stream_read_changes_the_variable(tmp_path):
    spec, _ = mep(tmp_path, """
        #include <fstream>
        int main(int argc, char** argv) {
            std::ifstream in("n.txt");
            int n = 64;
            in >> n;
            float *x, *y;
            cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
            axpy<<<(n + 255) / 256, 256>>>(y, x, 1.5f, n);
            return 0;
        }""")
    t = todo_of(spec, "sizes.")
    assert t.kind == "file" and ">>" in t.reason, t
    assert 64 not in spec.sizes.values()


def test_values_of_the_run_are_runtime_todos(tmp_path):
    spec, app = mep(tmp_path, """
        int main() {
            int *d_count, n;
            cudaMalloc(&d_count, sizeof(int));
            cudaMemcpy(&n, d_count, sizeof(int), cudaMemcpyDeviceToHost);
            float a = rand() / (float)RAND_MAX;
            float *x, *y;
            cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
            axpy<<<(n + 255) / 256, 256>>>(y, x, a, n);
            return 0;
        }""")
    n = todo_of(spec, "sizes.")
    assert n.kind == "runtime" and "copied from the GPU by cudaMemcpy()" in n.reason, n
    a = todo_of(spec, "params[2].value")
    assert a.kind == "runtime" and "rand()" in a.reason, a
    text = (app / ".mepgen" / "meps" / "axpy" / "mep.yaml").read_text()
    assert "kind: runtime" in text                     # the kind is written where the todo is
    r = CliRunner().invoke(main, ["ready", "--json", "-C", str(app)])
    kinds = {t["kind"] for k in json.loads(r.output)["kernels"] for t in k["todo"]}
    assert kinds == {"runtime"}


def test_a_global_set_from_the_command_line_or_a_file_is_a_file_todo(tmp_path):
    spec, _ = mep(tmp_path, """
        int rows;
        void read_problem(const char* path) { FILE* f = fopen(path, "r"); fscanf(f, "%d", &rows); }
        int main(int argc, char** argv) {
            if (argv[1][1] == 's') rows = atoi(argv[2]); else read_problem(argv[2]);
            float *x, *y;
            cudaMalloc(&x, rows * sizeof(float)); cudaMalloc(&y, rows * sizeof(float));
            axpy<<<(rows + 255) / 256, 256>>>(y, x, 1.0f, rows);
            return 0;
        }""")
    t = todo_of(spec, "sizes.")
    assert t.kind == "file" and "fscanf" in t.reason and "2 place(s)" in t.reason, t


def test_a_value_a_caller_reads_is_named_at_the_wrapper(tmp_path):
    spec, _ = mep(tmp_path, """
        void run_axpy(float* y, const float* x, float w, int n) { axpy<<<(n + 255) / 256, 256>>>(y, x, w, n); }
        int main() {
            FILE* f = fopen("w.txt", "r");
            float w; fscanf(f, "%f", &w);
            const int n = 1 << 12;
            float *x, *y;
            cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
            run_axpy(y, x, w, n);
            return 0;
        }""")
    t = todo_of(spec, "params[2].value")
    assert t.kind == "file" and "fscanf" in t.reason, t
    assert size_of(spec, "n") == 4096


def test_chained_assignments_and_sizes_changed_before_the_allocation_are_derived(tmp_path):
    spec, _ = mep(tmp_path, """
        #define PAD 32
        int main() {
            float step = 0.5f, h = 4.0f;
            float ax, ay;
            ax = ay = step / h;
            int n = 1000;
            n = 2 * n + PAD;
            float *x, *y;
            cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
            axpy<<<64, 256>>>(y, x, ax, 4096);
            return 0;
        }""")
    assert spec.todo == [], [(t.field, t.reason) for t in spec.todo]
    assert eval(spec.param("a").value.rstrip("f").replace("f", "")) == 0.125
    counts = {p.name: p.count for p in spec.params if p.count}
    assert cexpr.evaluate(counts["x"], {"PAD": 32, **spec.sizes}) == 2032


def test_a_variable_the_loop_changes_after_the_launch_takes_its_first_round_value(tmp_path):
    spec, app = mep(tmp_path, """
        int main() {
            const int n = 1 << 16, chunk = 1 << 12;
            float *x, *y;
            cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
            int left = n;
            float a = 1.0f;
            while (left > 0) {
                axpy<<<(chunk + 255) / 256, 256>>>(y, x, a, left);
                left -= chunk;
                a *= 0.5f;
            }
            return 0;
        }""")
    assert spec.todo == [], [(t.field, t.reason) for t in spec.todo]
    assert size_of(spec, "n") == 1 << 16 and spec.param("a").value in ("1.0f", "1.0")
    text = (app / ".mepgen" / "meps" / "axpy" / "mep.yaml").read_text()
    assert "after the launch" in text and "first iteration" in text


def test_the_run_script_beside_a_program_in_a_subfolder_gives_its_arguments(tmp_path):
    spec, _ = mep(tmp_path, """
        int main(int argc, char** argv) {
            int n = atoi(argv[1]);
            float *x, *y;
            cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
            axpy<<<(n + 255) / 256, 256>>>(y, x, 3.0f, n);
            return 0;
        }""", files={"Makefile": "all:\n\tmake -C first\n", "first/run": "./first 5000\n"}, sub="first")
    assert spec.todo == [], [(t.field, t.reason) for t in spec.todo]
    assert size_of(spec, "n") == 5000


def test_a_size_derived_from_a_size_read_from_a_file_keeps_its_origin(tmp_path):
    spec, _ = mep(tmp_path, """
        #define TILE 64
        int main() {
            FILE* f = fopen("mesh.txt", "r");
            int cells;
            fscanf(f, "%d", &cells);
            int padded = TILE * ((cells + TILE - 1) / TILE);
            int blocks = 1;
            if (cells > 4096) blocks = padded / 256;
            float *x, *y;
            cudaMalloc(&x, padded * sizeof(float)); cudaMalloc(&y, padded * sizeof(float));
            axpy<<<blocks, 256>>>(y, x, 1.0f, padded);
            return 0;
        }""")
    kinds = {t.field: t.kind for t in spec.todo}
    assert set(kinds.values()) == {"file"}, [(t.field, t.reason) for t in spec.todo]
    reasons = " ".join(t.reason for t in spec.todo)
    assert "depends on this" in reasons and "under a condition" in reasons


def test_a_condition_over_run_command_values_is_decided(tmp_path):
    spec, _ = mep(tmp_path, """
        int main(int argc, char** argv) {
            int n = atoi(argv[1]);
            int blocks = n / 256;
            if (n % 256) blocks++;
            float *x, *y;
            cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
            axpy<<<blocks, 256>>>(y, x, 1.0f, n);
            return 0;
        }""", files={"run": "./axpy 1000\n"})
    assert spec.todo == [], [(t.field, t.reason) for t in spec.todo]
    assert cexpr.evaluate(spec.launch.grid[0], spec.sizes) == 4


def test_an_untraced_initializer_of_a_followed_variable_is_its_own_reason(tmp_path):
    spec, _ = mep(tmp_path, """
        int main() {
            const int n = 4096;
            float *x, *y;
            cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
            float w;
            if (n > 10) w = 2.0f;
            int* bounds = (int*)malloc(2 * sizeof(int));
            for (int i = 0; i < 2; i++) bounds[i] = i * 1000;
            int rows = bounds[1] - bounds[0];
            while (rows > 0) {
                axpy<<<(rows + 255) / 256, 256>>>(y, x, w, rows);
                rows -= 256;
            }
            return 0;
        }""")
    t = todo_of(spec, "sizes.")
    assert "`rows` in main() is `bounds[1] - bounds[0]`" in t.reason and "`w`" not in t.reason, t
    assert t.kind == "placeholder"


def test_a_function_like_macro_over_host_values_is_expanded(tmp_path):
    spec, app = mep(tmp_path, """
        #define SMALLER(p, q) ((p) < (q) ? (p) : (q))
        int main() {
            const int n = 2048, total = 100, step = 16;
            float *x, *y;
            cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
            for (int t = 0; t < total; t += step)
                axpy<<<n / 256, 256>>>(y, x, 1.0f, SMALLER(n, total - t));
            return 0;
        }""")
    assert spec.todo == [], [(t.field, t.reason) for t in spec.todo]
    assert size_of(spec, "n") == 100                 # the first iteration: t = 0


def test_a_parameter_whose_caller_is_in_a_plain_cpp_file_is_derived(tmp_path):
    """The caller lives in a file without CUDA code: mepgen reads it when the value leads there (mep/hostsrc.py)."""
    spec, _ = mep(tmp_path, """
        struct Problem { int rows; };
        void launch_axpy(float* y, const float* x, const Problem& pb, int n) {
            int rows = pb.rows;
            axpy<<<(rows + 255) / 256, 256>>>(y, x, 2.0f, n);
        }""", files={"host.cpp": """
        struct Problem { int rows; };
        void launch_axpy(float* y, const float* x, const Problem& pb, int n);
        int main() { Problem pb{1000}; launch_axpy(nullptr, nullptr, pb, 1000); return 0; }
        """})
    assert spec.todo == [], [(t.field, t.reason) for t in spec.todo]
    assert size_of(spec, "n") == 1000


def test_programs_of_one_folder_each_get_their_own_mains_values(tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    for name, n in (("small.cu", 1000), ("large.cu", 5000)):
        (app / name).write_text(textwrap.dedent(KERNEL) + textwrap.dedent(f"""
            static void run_axpy(float* y, const float* x, int n) {{ axpy<<<(n + 255) / 256, 256>>>(y, x, 1.0f, n); }}
            int main() {{
                int n = 10;
                n = n * {n // 10};
                float *x, *y;
                cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
                run_axpy(y, x, n);
                return 0;
            }}"""))
    extract(app, ExtractOptions(jobs=1))
    r = CliRunner().invoke(main, ["mep", "--all", "-C", str(app)])
    assert r.exit_code == 0, r.output
    found = {}
    for path in (app / ".mepgen" / "meps").glob("*/mep.yaml"):
        spec = load_spec(path)
        assert spec.todo == [], [(t.field, t.reason) for t in spec.todo]
        found[spec.kernel.source] = size_of(spec, "n")
    assert found == {"small.cu": 1000, "large.cu": 5000}
