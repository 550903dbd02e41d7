"""Sizes that travel the way C programs pass options around: a word of the command line holding two numbers
(`-g 640x480`, read with atoi and strchr), an options struct that main fills in and hands down by pointer, a
recursive host helper that launches at every level, a templated rounding helper, and a launching template whose
instantiation is chosen by an `if` on the size. Each is derived, and mep.yaml's notes say how."""
from __future__ import annotations

import textwrap

from mepgen.extract import ExtractOptions, extract
from mepgen.mep.cstrings import convert
from mepgen.spec import load_spec
from mep_apps import run

GRID = """
    #include <cstdlib>
    #include <cstring>
    #include <getopt.h>
    struct settings { int cols; int rows; int depth; };

    template <typename I>
    I ceil_div(const I& a, const I& b) { return (a + b - 1) / b; }

    __global__ void smooth(const float* in, float* out, int cols, int rows)
    {
        int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
        if (x < cols && y < rows) out[y * cols + x] = 0.5f * in[y * cols + x];
    }

    template <int TILE>
    void smooth_level(const float* in, float* out, int cols, int rows)
    {
        dim3 grid(ceil_div(cols, TILE), rows);
        smooth<<<grid, TILE>>>(in, out, cols, rows);
    }

    void pyramid(const float* in, float* out, int cols, int rows, int levels)
    {
        if (cols >= 1000) smooth_level<256>(in, out, cols, rows);
        else smooth_level<32>(in, out, cols, rows);
        if (levels > 1) pyramid(out, (float*)in, cols / 2, rows / 2, levels - 1);
    }

    void process(settings* s)
    {
        float *a, *b;
        cudaMalloc(&a, s->cols * s->rows * sizeof(float));
        cudaMalloc(&b, s->cols * s->rows * sizeof(float));
        pyramid(a, b, s->cols, s->rows, s->depth);
    }

    int main(int argc, char** argv)
    {
        int cols = 0, rows = 0, depth = 2, c;
        char* mark;
        while ((c = getopt(argc, argv, "g:l:")) != -1) {
            switch (c) {
            case 'g':
                cols = atoi(optarg);
                mark = strchr(optarg, 'x');
                if (mark == NULL) return 1;
                rows = atoi(mark + 1);
                break;
            case 'l':
                depth = atoi(optarg);
                break;
            }
        }
        settings* s = (settings*)malloc(sizeof(settings));
        s->cols = cols;
        s->rows = rows;
        s->depth = depth;
        process(s);
        return 0;
    }
"""


def _app(tmp_path, source, files):
    app = tmp_path / "app"
    app.mkdir(parents=True)
    (app / "main.cu").write_text(textwrap.dedent(source))
    for name, text in files.items():
        (app / name).write_text(text)
    extract(app, ExtractOptions(jobs=1))
    return app


def _mep(app, kernel):
    path = app / ".mepgen" / "meps" / kernel / "mep.yaml"
    return load_spec(path), path.read_text()


def test_a_word_of_two_numbers_an_options_struct_and_a_recursive_helper(tmp_path):
    app = _app(tmp_path, GRID, {"run.sh": "./main -g 640x120 -l 3 picture.raw\n"})
    r = run("smooth", "-C", app)
    assert r.exit_code == 0, r.output
    spec, text = _mep(app, "smooth")
    assert spec.todo == []
    sizes = {k: v for k, v in spec.sizes.items()}
    assert sorted(sizes.values()) == [120, 640], sizes
    # 640 is below the `cols >= 1000` test: the run launches the <32> instantiation, not the first one written
    assert spec.launch.callee == "smooth" and spec.kernel.template_args == []
    assert [str(b) for b in spec.launch.block] == ["32"]
    assert "the call the run reaches" in text
    assert "= atoi(optarg) (option -g) = 640" in text
    assert "(option -g) = 120" in text and "strchr" in text
    assert "`s->cols` is set by main()" in text
    assert "value of its outermost call" in text


def test_a_size_above_the_threshold_takes_the_other_instantiation(tmp_path):
    app = _app(tmp_path, GRID, {"run.sh": "./main -g 2048x16\n"})
    r = run("smooth", "-C", app)
    assert r.exit_code == 0, r.output
    spec, _ = _mep(app, "smooth")
    assert [str(b) for b in spec.launch.block] == ["256"]


def test_a_field_set_under_a_condition_is_not_taken(tmp_path):
    """`s->cols = cols;` under `if (argc > 3)` may or may not run, and `cond ? (s->cols = cols) : 0` too: no
    value, a todo."""
    source = GRID.replace("s->cols = cols;", "if (argc > 3) s->cols = cols;")
    app = _app(tmp_path / "if", source, {"run.sh": "./main -g 640x120\n"})
    assert run("smooth", "-C", app).exit_code == 3
    spec, _ = _mep(app, "smooth")
    assert spec.todo
    source = GRID.replace("s->cols = cols;", "argc > 3 ? (s->cols = cols) : 0;")
    app = _app(tmp_path, source, {"run.sh": "./main -g 640x120\n"})
    r = run("smooth", "-C", app)
    assert r.exit_code == 3, r.output
    spec, _ = _mep(app, "smooth")
    assert spec.todo


def test_a_struct_on_the_stack_passed_by_address(tmp_path):
    source = """
        #include <cstdlib>
        struct shape { int n; };
        __global__ void zero(int* v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] = 0; }
        void clear_all(const shape* sh)
        {
            int* v;
            cudaMalloc(&v, sh->n * sizeof(int));
            zero<<<(sh->n + 127) / 128, 128>>>(v, sh->n);
        }
        int main(int argc, char** argv)
        {
            shape sh;
            sh.n = 3000;
            clear_all(&sh);
            return 0;
        }
    """
    app = _app(tmp_path, source, {})
    r = run("zero", "-C", app)
    assert r.exit_code == 0, r.output
    spec, text = _mep(app, "zero")
    assert spec.todo == []
    assert "`sh.n` is set by main()" in text and "3000" in text


def test_words_are_read_as_the_c_library_reads_them():
    assert convert("atoi(optarg)", "800x600", True) == "800"
    assert convert('atoi(strchr(optarg, \'x\') + 1)', "800x600", True) == "600"
    assert convert('atol((strstr(argv[2], ",")) + 1)', "7,9", True) == "9"
    assert convert("strtol(optarg, NULL, 10)", "12abc", True) == "12"
    assert convert("atof(optarg)", "2.5e1rest", False) == "2.5e1"
    # no number where the converter starts, a separator that is not there, another base: no value
    assert convert("atoi(optarg)", "abc", True) is None
    assert convert("atoi(strchr(optarg, ',') + 1)", "800x600", True) is None
    assert convert("strtol(optarg, NULL, 16)", "ff", True) is None
    assert convert("lookup(optarg)", "10", True) is None
