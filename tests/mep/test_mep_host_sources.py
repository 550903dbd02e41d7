"""Values that reach a launch through the application's plain C/C++ sources (issue 20): a size a `.c` main passes
to a function of a `.cu` file, a struct a C create function fills from the command line, a global the launching
function sets once before the launch, a size a C caller reads from a file. Each application is written here."""
from __future__ import annotations

import textwrap

from mepgen.extract import ExtractOptions, extract
from mepgen.spec import load_spec
from mep_apps import run

GPU_CU = """
    #include "api.h"
    __global__ void scale(float* v, int n, int reps)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        for (int r = 0; r < reps; r++)
            if (i < n) v[i] = 0.5f * v[i];
    }
    extern "C" void run_gpu(int n, int reps)
    {
        float* v;
        cudaMalloc(&v, n * sizeof(float));
        scale<<<(n + 127) / 128, 128>>>(v, n, reps);
    }
"""
API_H = """
    #ifdef __cplusplus
    extern "C" {
    #endif
    void run_gpu(int n, int reps);
    #ifdef __cplusplus
    }
    #endif
"""


def app_of(tmp_path, files: dict[str, str]):
    app = tmp_path / "app"
    for name, text in files.items():
        (app / name).parent.mkdir(parents=True, exist_ok=True)
        (app / name).write_text(textwrap.dedent(text))
    extract(app, ExtractOptions(jobs=1))
    return app


def spec_of(app, kernel):
    return load_spec(app / ".mepgen" / "meps" / kernel / "mep.yaml")


def test_a_size_a_c_main_passes_to_the_cuda_file_is_derived(tmp_path):
    app = app_of(tmp_path, {"gpu.cu": GPU_CU, "api.h": API_H, "main.c": """
        #include "api.h"
        main()                       /* old C: implicit int */
        {
            int sweeps = 12;
            run_gpu(1 << 14, sweeps);
            return 0;
        }
    """})
    r = run("--all", "-C", app)
    assert r.exit_code == 0, r.output
    s = spec_of(app, "scale")
    assert not s.todo
    assert [s.size(e) for e in s.launch.grid] == [128] and [s.size(e) for e in s.launch.block] == [128]
    assert s.size(s.params[1].value) == 1 << 14 and s.size(s.params[2].value) == 12
    # the inventory lists the plain source, parsed only by the mep stage
    assert '"host_sources"' in (app / ".mepgen" / "inventory.json").read_text()


def test_a_struct_a_c_create_function_fills_from_the_command_line_is_followed(tmp_path):
    files = {"run": "./sim 8192\n", "grid.h": """
        typedef struct { int cells; float *data; } Grid;
        Grid *grid_new(int cells);
        #ifdef __cplusplus
        extern "C"
        #endif
        void simulate(Grid *g);
    """, "grid.c": """
        #include <stdlib.h>
        #include "grid.h"
        Grid *grid_new(int cells)
        {
            Grid *g = (Grid *)malloc(sizeof(Grid));
            if (g == NULL) return NULL;
            g->cells = cells;
            g->data = (float *)calloc(cells, sizeof(float));
            return g;
        }
    """, "main.c": """
        #include <stdlib.h>
        #include "grid.h"
        int requested = 0;
        int main(int argc, char **argv)
        {
            requested = atoi(argv[1]);
            Grid *g = grid_new(requested);
            simulate(g);
            return 0;
        }
    """, "sim.cu": """
        #include "grid.h"
        __global__ void relax(float* d, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) d[i] *= 0.9f; }
        unsigned int blocks = 0;
        extern "C" void simulate(Grid *g)
        {
            int n;
            float* d;
            n = g->cells;
            cudaMalloc(&d, n * sizeof(float));
            blocks = n / 64;                    // a global, set straight-line before the launch
            relax<<<blocks, 64>>>(d, n);
        }
    """}
    app = app_of(tmp_path, files)
    r = run("--all", "-C", app)
    assert r.exit_code == 0, r.output
    s = spec_of(app, "relax")
    assert not s.todo
    assert [s.size(e) for e in s.launch.grid] == [128] and s.size(s.params[1].value) == 8192
    yaml = (app / ".mepgen" / "meps" / "relax" / "mep.yaml").read_text()
    assert "grid_new() at grid.c" in yaml and "./sim 8192" in yaml      # the stated choices

    # a second place that sets the field: mepgen does not know which holds at the launch
    (app / "reset.c").write_text('#include "grid.h"\nvoid grid_reset(Grid *g) { g->cells = 1; }\n')
    extract(app, ExtractOptions(jobs=1))
    r = run("--all", "--force", "-C", app)
    assert r.exit_code == 3
    reasons = " ".join(t.reason for t in spec_of(app, "relax").todo)
    assert "`->cells` is set by grid.c" in reasons and "reset.c" in reasons


def test_a_global_set_under_a_condition_before_the_launch_stays_a_todo(tmp_path):
    app = app_of(tmp_path, {"k.cu": """
        #define LEN 4096
        __global__ void fill(float* v) { v[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }
        unsigned int nblocks = 0;
        void go(int wide)
        {
            float* v;
            cudaMalloc(&v, LEN * sizeof(float));
            nblocks = LEN / 256;
            if (wide) nblocks = LEN / 128;
            fill<<<nblocks, 256>>>(v);
        }
        int main(int argc, char** argv) { go(argc > 1); return 0; }
    """})
    r = run("--all", "-C", app)
    assert r.exit_code == 3
    todo = spec_of(app, "fill").todo
    assert any("`nblocks` is assigned at k.cu:10 under a condition" in t.reason for t in todo), [t.reason for t in todo]


def test_a_size_a_c_caller_reads_from_a_file_is_a_file_todo(tmp_path):
    app = app_of(tmp_path, {"gpu.cu": GPU_CU, "api.h": API_H, "main.c": """
        #include <stdio.h>
        #include "api.h"
        int main(int argc, char **argv)
        {
            int count = 0, binary = argc > 2;
            FILE *f = fopen(argv[1], "rb");
            if (binary) {
                fread(&count, sizeof(int), 1, f);
            } else {
                char line[256];
                while (fgets(line, sizeof line, f)) count++;
            }
            run_gpu(count, 3);
            return 0;
        }
    """})
    r = run("--all", "-C", app)
    assert r.exit_code == 3
    todo = spec_of(app, "scale").todo
    assert todo and all(t.kind == "file" for t in todo), [(t.kind, t.reason) for t in todo]
    assert any("fread" in t.reason and "main.c" in t.reason for t in todo)


def test_a_plain_source_with_errors_leaves_a_todo_not_an_error(tmp_path):
    import json

    from click.testing import CliRunner
    from mepgen.cli import main
    app = app_of(tmp_path, {"gpu.cu": GPU_CU, "api.h": API_H, "main.c": """
        #include "api.h"
        int main( { run_gpu(
    """, "other.c": "int unrelated(void) { return 1; }\n"})
    r = run("--all", "-C", app)
    assert r.exit_code == 3, r.output
    reasons = " ".join(t.reason for t in spec_of(app, "scale").todo)
    assert "`n`" in reasons and "run_gpu()" in reasons
    # `mepgen ready` says which plain sources it read, and that this one had errors; other.c was never parsed
    r = CliRunner().invoke(main, ["ready", "-C", str(app), "--json"])
    plain = json.loads(r.output)["plain_sources"]
    assert plain["read"] == ["main.c"] and "main.c" in plain["with_errors"] and not plain["not_parsed"]
    text = CliRunner().invoke(main, ["ready", "-C", str(app)]).output
    assert "read for values: 1 sources without CUDA code (1 with parse errors" in text


def test_a_size_passed_by_address_in_a_branch_the_run_does_not_take_is_the_options_value(tmp_path):
    """`-n` sets the size; only `-f FILE` (which the run command does not give) reads it from a file through its
    address; the program lives in a sub-folder whose own Makefile names the header folder, and the run script
    starts it by a relative path."""
    app = app_of(tmp_path, {"run": "prog/solver -n 512 -q\n", "shared/io.h": """
        int load_size(const char* path, int* n);
    """, "prog/Makefile": """
        CFLAGS = -I../shared -O2
        solver: main.cu
        \tnvcc $(CFLAGS) main.cu -o solver
    """, "prog/main.cu": """
        #include <getopt.h>
        #include <stdlib.h>
        #include "io.h"
        __global__ void decay(float* a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= 0.5f; }
        int main(int argc, char** argv)
        {
            int n = 64, c, quiet = 0;
            const char* from = NULL;
            while ((c = getopt(argc, argv, "n:f:q")) != -1) {
                switch (c) {
                case 'n': n = atoi(optarg); break;
                case 'f': from = optarg; break;
                case 'q': quiet = 1; break;
                }
            }
            if (from) {
                load_size(from, &n);
            }
            float* a;
            cudaMalloc(&a, n * sizeof(float));
            decay<<<(n + 63) / 64, 64>>>(a, n);
            return quiet;
        }
    """})
    r = run("--all", "-C", app)
    assert r.exit_code == 0, r.output
    s = spec_of(app, "decay")
    assert [s.size(e) for e in s.launch.grid] == [8] and s.size(s.params[1].value) == 512
    yaml = (app / ".mepgen" / "meps" / "decay" / "mep.yaml").read_text()
    assert "passes no option -f" in yaml and "(option -n) = 512" in yaml

    # with `-f` in the run command the size comes from the file the option names: a todo
    (app / "run").write_text("prog/solver -f sizes.txt\n")
    r = run("--all", "--force", "-C", app)
    assert r.exit_code == 3


def test_an_object_built_from_what_a_loader_reads_is_a_file_todo(tmp_path):
    """The launch's size is a field of an object that is changed by reference; it is built from `info->n`,
    which a loader of the application fills from a file through the pointer: a `file` todo, not a bare one."""
    app = app_of(tmp_path, {"grid.h": """
        struct Info { int n; };
        int load_info(const char* path, Info* info);
        class Grid { public: int n; explicit Grid(int count) : n(count) {} void fill(const float* v); };
        void run(Grid& g);
    """, "io.cpp": """
        #include <cstdio>
        #include "grid.h"
        int load_info(const char* path, Info* info)
        {
            FILE* f = fopen(path, "r");
            return f && fscanf(f, "%d", &info->n) == 1;
        }
    """, "main.cpp": """
        #include <cstdlib>
        #include "grid.h"
        int main(int argc, char** argv)
        {
            Info* info = (Info*)malloc(sizeof(Info));
            load_info(argv[1], info);
            Grid g(info->n);
            float seed[4] = {1, 2, 3, 4};
            g.fill(seed);
            run(g);
            return 0;
        }
    """, "run.cu": """
        #include "grid.h"
        __global__ void halve(float* d, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) d[i] *= 0.5f; }
        void run(Grid& g)
        {
            int n = g.n;
            float* d;
            cudaMalloc(&d, n * sizeof(float));
            halve<<<(n + 63) / 64, 64>>>(d, n);
        }
    """})
    r = run("--all", "-C", app)
    assert r.exit_code == 3
    todo = spec_of(app, "halve").todo
    assert todo and all(t.kind == "file" for t in todo), [(t.kind, t.reason) for t in todo]
    assert any("built from `info`, which is filled by load_info" in t.reason for t in todo), todo


def test_a_size_behind_a_pointer_parameter_is_its_callers_value(tmp_path):
    app = app_of(tmp_path, {"k.cu": """
        __global__ void zero(float* v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] = 0.0f; }
        void clear(float* v, const int* len) { zero<<<*len / 64, 64>>>(v, *len); }
        int main()
        {
            const int count = 4096;
            float* v;
            cudaMalloc(&v, count * sizeof(float));
            clear(v, &count);
            return 0;
        }
    """})
    r = run("--all", "-C", app)
    assert r.exit_code == 0, r.output
    s = spec_of(app, "zero")
    assert [s.size(e) for e in s.launch.grid] == [64] and s.size(s.params[1].value) == 4096


def test_a_library_function_named_like_a_reader_counts_as_one():
    from mepgen.mep.readers import _READER_NAME
    readers = ["read_graph", "readMatrix", "loadData", "LoadImage", "Lib_ReadTriplet", "load"]
    others = ["cudaThreadSynchronize", "isReady", "reader", "spread", "download", "threadCount"]
    assert all(_READER_NAME.search(n) for n in readers)
    assert not any(_READER_NAME.search(n) for n in others)


def test_only_plain_sources_that_may_change_a_global_or_field_are_parsed_for_it(tmp_path):
    from mepgen.mep.hostsrc import HostSources
    files = {"reads.c": "void f(Net *net, FILE *fp) { fscanf(fp, \"%d\", &net->cells); }",
             "uses.c": "int g(Net *net) { return net->cells <= 4 ? net->cells : 0; }",
             "sets.c": "int cells; void h(void) { cells += 2; }",
             "calls.c": "void k(void) { cells_init(); }"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    host = HostSources(tmp_path, [{"file": f} for f in files])
    assert [e["file"] for e in host.mentioning("cells", writes=True)] == ["reads.c", "sets.c"]
    assert [e["file"] for e in host.mentioning("cells")] == ["reads.c", "uses.c", "sets.c"]
    assert host.mentioning("cells") == []          # once per name


def test_plain_sources_are_listed_with_their_language_and_their_folders_flags(tmp_path):
    from mepgen.extract.flags import CompileEntry, default_flags, parse_command
    from mepgen.extract.hostfiles import host_sources
    app = tmp_path / "app"
    for name, text in {"k.cu": "", "main.c": "", "util.cpp": "", "tool/run.cc": "", "tool/Makefile":
                       "CFLAGS = -I../inc -DTOOL=1\nall:\n\tcc $(CFLAGS) run.cc\n", "inc/x.h": ""}.items():
        (app / name).parent.mkdir(parents=True, exist_ok=True)
        (app / name).write_text(text)
    listed = {e["file"]: e for e in host_sources(app, [app / "k.cu"], default_flags(app, [], []))}
    assert sorted(listed) == ["main.c", "tool/run.cc", "util.cpp"]
    assert listed["main.c"]["language"] == "c" and listed["main.c"]["std"] == "gnu17"
    assert listed["util.cpp"]["language"] == "c++" and listed["util.cpp"]["std"] == "c++17"
    assert str(app / "inc") in listed["tool/run.cc"]["include_dirs"] and "TOOL=1" in listed["tool/run.cc"]["defines"]
    # with compile_commands.json: the files it lists, with their own flags
    entry = CompileEntry(app / "main.c", parse_command(["cc", "-std=c99", "-DFAST", "-c", "main.c"], app))
    listed = host_sources(app, [app / "k.cu"], None, [entry])
    assert listed == [{"file": "main.c", "language": "c", "include_dirs": [], "defines": ["FAST"], "std": "c99"}]


def test_a_run_script_may_start_the_program_by_a_relative_path(tmp_path):
    from mepgen.extract.runcommand import find_run_command
    (tmp_path / "run").write_text("# cuda/app -i data.bin\ntools/make_input.sh 64\ncuda/app -s 256 -v\n")
    rc = find_run_command(tmp_path)
    assert rc.program == "cuda/app" and rc.args == ["-s", "256", "-v"]
