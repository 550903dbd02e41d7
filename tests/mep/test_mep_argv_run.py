"""Sizes and scalars read from the command line take their values from the application's own run command
(a Makefile `run` target, a run script, a CMake add_test), as a stated choice named in mep.yaml; a file
argument, or no run command, leaves the todo with why and `mepgen capture` as the way."""
from __future__ import annotations

import textwrap

from mepgen.extract import ExtractOptions, extract
from mepgen.extract.runcommand import find_run_command
from mepgen.spec import load_spec
from mep_apps import run

SOURCE = """
    #include <cstdlib>
    __global__ void scale(float* v, int n, float a)
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] *= a; }
    int main(int argc, char** argv)
    {
        int n = atoi(argv[1]);
        const int threads = argc > 2 ? atoi(argv[2]) : 128;
        float a = atof(argv[3]);
        float* v;
        cudaMalloc(&v, n * sizeof(float));
        scale<<<(n + threads - 1) / threads, threads>>>(v, n, a);
        return 0;
    }
"""


def app_with(tmp_path, files: dict[str, str], source: str = SOURCE):
    app = tmp_path / "app"
    app.mkdir()
    (app / "main.cu").write_text(textwrap.dedent(source))
    for name, text in files.items():
        (app / name).write_text(textwrap.dedent(text))
    extract(app, ExtractOptions(jobs=1))
    return app


def mep_of(app, kernel="scale"):
    path = app / ".mepgen" / "meps" / kernel / "mep.yaml"
    return load_spec(path), path.read_text()


MAKEFILE = """\
    program = main
    ARGS = 256 0.5
    all: $(program)
    $(program): main.cu
    \tnvcc -o $@ $<
    run: $(program)
    \t$(LAUNCHER) ./$(program) 20000 $(ARGS) > log.txt
"""


def test_makefile_run_target_gives_the_sizes_and_scalars(tmp_path):
    app = app_with(tmp_path, {"Makefile": MAKEFILE})
    rc = find_run_command(app)
    assert rc.args == ["20000", "256", "0.5"] and rc.text == "./main 20000 256 0.5"
    r = run("scale", "-C", app)
    assert r.exit_code == 0, r.output
    spec, text = mep_of(app)
    assert spec.todo == []
    assert spec.sizes[spec.param("n").value] == 20000
    assert spec.param("a").value == "0.5"
    assert sorted(spec.sizes.values()) == [256, 20000]             # threads from argv[2]
    assert "`n` = atoi(argv[1]) = 20000, from the Makefile's run target: `./main 20000 256 0.5`" in text
    assert "`a` = atof(argv[3]) = 0.5" in text


def test_run_script_with_fewer_arguments_uses_the_code_default(tmp_path):
    app = app_with(tmp_path, {"run": "#!/bin/bash\n# how to run\n./scale.out 300\n"}, SOURCE.replace(
        "float a = atof(argv[3]);", "float a = 2.0f;"))
    r = run("scale", "-C", app)
    assert r.exit_code == 0, r.output
    spec, text = mep_of(app)
    assert spec.todo == []
    assert spec.sizes[spec.param("n").value] == 300
    assert "`threads` = 128, the application's default: the run script `run`: `./scale.out 300` passes no " \
        "argv[2]" in text
    assert 128 in spec.sizes.values()


def test_a_file_argument_stays_a_todo_naming_capture(tmp_path):
    app = app_with(tmp_path, {"run": "./scale.out ../data/input.txt 64 1.5\n"})
    r = run("scale", "-C", app)
    assert r.exit_code == 3, r.output
    spec, _ = mep_of(app)
    reasons = {t.field: t.reason for t in spec.todo}
    n_field = f"sizes.{spec.param('n').value}"
    assert list(reasons) == [n_field]
    assert "passes `../data/input.txt` there (a file)" in reasons[n_field]
    assert "mepgen capture" in reasons[n_field]
    assert spec.param("a").value == "1.5"


def test_no_run_command_keeps_the_todo_and_says_so(tmp_path):
    app = app_with(tmp_path, {})
    assert find_run_command(app) is None
    r = run("scale", "-C", app)
    assert r.exit_code == 3, r.output
    spec, _ = mep_of(app)
    reasons = " ".join(t.reason for t in spec.todo)
    assert "argv[1]" in reasons and "states no run command" in reasons and "mepgen capture" in reasons
    assert "params[2].value" in [t.field for t in spec.todo]        # the float has no value either


def test_cmake_add_test_is_a_run_command(tmp_path):
    app = tmp_path / "c"
    app.mkdir()
    (app / "CMakeLists.txt").write_text("project(p CUDA)\nadd_executable(sim sim.cu)\n"
                                        "add_test(NAME small COMMAND sim 512 8 WORKING_DIRECTORY ${X})\n")
    rc = find_run_command(app)
    assert rc.program == "sim" and rc.args == ["512", "8"] and "add_test" in rc.source


def test_todo_kinds_tell_what_static_completion_can_do():
    from mepgen.todokind import in_scope, todo_kind
    assert todo_kind("sizes.N", "`n` in main() comes from the command line (`argv[1]` at a.cu:3); no default") == "argv"
    assert todo_kind("sizes.N", "`n` comes from the command line; the run script `run`: `./a in.dat` passes "
                     "`in.dat` there (a file); `mepgen capture ...`") == "file"
    assert todo_kind("sizes.ROWS", "`rows` in load() is `readHeader(fp)`, which mepgen could not trace") == "file"
    assert todo_kind("params[2].value", "`seed` (int) gets `rand() % 7` at the launch, which mepgen could not "
                     "trace to a value") == "runtime"
    assert todo_kind("params[0].dtype", "`Node *` (16-byte elements) is not a numeric element type") == "capture"
    assert todo_kind("launch", "the launch configuration at a.cu:9 gives `g`") == "launch"
    assert todo_kind("params[1].count", "`x` is accessed at [i]; mepgen could not bound it") == "count"
    assert todo_kind("sizes.M", "`m` in main() is `f(3)`, which mepgen could not trace to a value") == "placeholder"
    assert in_scope(["argv", "launch"]) and not in_scope(["argv", "file"]) and in_scope([])


GETOPT = """
    #include <cstdlib>
    #include <unistd.h>
    __global__ void fill(int* out, int len, int stride)
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < len) out[i] = i * stride; }
    int main(int argc, char** argv)
    {
        int len = 1 << 12, stride = 3, opt;
        while ((opt = getopt(argc, argv, "l:s:v")) != -1) {
            switch (opt) {
            case 'l': len = atoi(optarg); break;
            case 's': stride = atoi(optarg); break;
            default: break;
            }
        }
        int* out;
        cudaMalloc(&out, len * sizeof(int));
        fill<<<(len + 255) / 256, 256>>>(out, len, stride);
        return 0;
    }
"""


def test_getopt_options_take_the_run_commands_values_or_the_code_default(tmp_path):
    app = app_with(tmp_path, {"run.sh": "./fill -v -l 5000\n"}, GETOPT)
    r = run("fill", "-C", app)
    assert r.exit_code == 0, r.output
    spec, text = mep_of(app, "fill")
    assert spec.todo == []
    assert spec.sizes[spec.param("len").value] == 5000
    assert "`len` = atoi(optarg) (option -l) = 5000, from the run script `run.sh`: `./fill -v -l 5000`" in text
    assert "`stride` = 3, the application's default: the run script `run.sh`: `./fill -v -l 5000` passes no " \
        "option -s" in text
    assert spec.param("stride").value == "STRIDE" and spec.sizes["STRIDE"] == 3


CHECKED = """
    #include <cstdlib>
    #include <cstdio>
    int width;
    __global__ void blur(const float* in, float* out, int w, int passes)
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < w) out[i] = in[i] * passes; }
    void setup(int argc, char** argv)
    {
        if (argc >= 2) { width = atoi(argv[1]); }
        else { printf("usage: blur WIDTH PASSES\\n"); exit(1); }
    }
    int main(int argc, char** argv)
    {
        int passes = 1;
        setup(argc, argv);
        if ((passes = atoi(argv[2])) <= 0) exit(1);
        float *in, *out;
        cudaMalloc(&in, width * sizeof(float));
        cudaMalloc(&out, width * sizeof(float));
        blur<<<(width + 127) / 128, 128>>>(in, out, width, passes);
        return 0;
    }
"""


def test_a_global_set_by_an_init_function_and_an_assignment_inside_a_check(tmp_path):
    """`width` is set in setup() under `if (argc >= 2)`; `passes` is assigned inside an `if`'s own condition
    (the check that exits on a bad value): both read argv, both take the run script's arguments."""
    app = app_with(tmp_path, {"run": "./blur 777 5 > out.txt\n"}, CHECKED)
    r = run("blur", "-C", app)
    assert r.exit_code == 0, r.output
    spec, text = mep_of(app, "blur")
    assert spec.todo == []
    assert spec.sizes[spec.param("w").value] == 777 and spec.sizes[spec.param("passes").value] == 5
    assert "`width` = atoi(argv[1]) = 777, from the run script `run`: `./blur 777 5`" in text


MACRO_INIT = """
    #define ROUND_UP(a, b) ( a + b - 1 ) / b
    __global__ void zero(float* v, unsigned long n)
    { unsigned long i = blockIdx.x * (unsigned long)blockDim.x + threadIdx.x; if (i < n) v[i] = 0.0f; }
    unsigned long total_items();
    int main(int argc, char** argv)
    {
        unsigned long groups = ROUND_UP(total_items(), 64);
        float* v;
        cudaMalloc(&v, groups * 64 * sizeof(float));
        zero<<<groups, 64>>>(v, groups * 64);
        return 0;
    }
"""


def test_an_initializer_written_with_a_macro_is_no_command_line_value(tmp_path):
    """The extent of `ROUND_UP(total_items(), 64)` starts in the macro's definition, so its text spans main's
    `char** argv`: the todo is about the untraced call, shown as the line writes it, and mep.yaml stays valid."""
    app = app_with(tmp_path, {"run": "./zero 99\n"}, MACRO_INIT)
    r = run("zero", "-C", app)
    assert r.exit_code == 3, r.output
    spec, text = mep_of(app, "zero")
    reasons = " ".join(t.reason for t in spec.todo)
    assert "command line" not in reasons and "99" not in text
    assert "`groups` in main() is `ROUND_UP(total_items(), 64)`" in reasons


def test_sscanf_of_argv_and_options_compared_by_name_take_the_run_commands_values(tmp_path):
    app = app_with(tmp_path, {"Makefile": "run: main\n\t./main 3000 -alpha 0.25 --reps 7\n"}, """
        #include <cstdio>
        #include <cstdlib>
        #include <cstring>
        __global__ void scale(float* v, int n, float a, int reps)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) for (int r = 0; r < reps; r++) v[i] *= a; }
        int main(int argc, char** argv)
        {
            int n, reps = 1, block = 128;
            float a = 1.0f;
            if (sscanf(argv[1], "%d", &n) != 1) return 1;
            for (int i = 2; i < argc; i++) {
                if (!strcmp(argv[i], "-alpha")) a = atof(argv[++i]);
                else if (strcmp(argv[i], "--reps") == 0) reps = atoi(argv[++i]);
                else if (!strcmp(argv[i], "-block")) block = atoi(argv[++i]);
            }
            float* v;
            cudaMalloc(&v, n * sizeof(float));
            scale<<<(n + block - 1) / block, block>>>(v, n, a, reps);
            return 0;
        }
    """)
    r = run("scale", "-C", app)
    assert r.exit_code == 0, r.output
    spec, text = mep_of(app)
    assert spec.todo == []
    assert spec.sizes[spec.param("n").value] == 3000
    assert spec.param("a").value == "0.25"
    assert spec.sizes[spec.param("reps").value] == 7
    assert 128 in spec.sizes.values()                 # -block not given: the code's default
    assert "(option -alpha) = 0.25" in text and "(option --reps) = 7" in text


def test_a_command_line_value_rounded_up_after_it_is_read_keeps_the_run_commands_value(tmp_path):
    """`int w = atoi(argv[1]); w = (w + 63) / 64 * 64;`: the run command's value, then the assignment that
    rounds it, not a placeholder for a value mepgen could not trace."""
    app = app_with(tmp_path, {"Makefile": "run: main\n\t./main 1000 5\n"}, """
        #include <cstdlib>
        #define QUANT 64
        __global__ void halve(float* v, int n)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] *= 0.5f; }
        int main(int argc, char** argv)
        {
            int width = atoi(argv[1]);
            width = (width + QUANT - 1) / QUANT * QUANT;
            float* v;
            cudaMalloc(&v, width * sizeof(float));
            halve<<<width / QUANT, QUANT>>>(v, width);
            return 0;
        }
    """)
    r = run("halve", "-C", app)
    assert r.exit_code == 0, r.output
    s, text = mep_of(app, "halve")
    assert s.sizes == {"N": 1000, "QUANT": 64}          # named after the kernel's parameter it becomes
    assert s.param("n").value == "(N + QUANT - 1) / QUANT * QUANT" and s.todo == []
    assert "`width` = atoi(argv[1]) = 1000, from the Makefile's run target" in text
