"""A size handed on by reference (a timing wrapper taking `Args&&...`, `report(&n)`) after the launch that the MEP
reproduces cannot change that launch's value: the value is derived. Before the launch it stays a todo with the
reason; inside a loop that runs the launch again, the MEP reproduces the first iteration and says so (as for any
change after the launch in its loop). Each application is written here."""
from __future__ import annotations

import textwrap

from mepgen.extract import ExtractOptions, extract
from mepgen.spec import load_spec
from mep_apps import run

KERNEL = """
    #include <cstdio>
    #include <utility>
    __global__ void shift(float* v, int rows, int cols)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < rows * cols) v[i] = v[i] + 1.0f;
    }
    void step(float* v, int rows, int cols)
    {
        shift<<<(rows * cols + 255) / 256, 256>>>(v, rows, cols);
    }
    template <class F, class... A>
    float timed(int reps, F f, A&&... args)
    {
        for (int r = 0; r < reps; r++) f(std::forward<A>(args)...);
        return 0.0f;
    }
    void report(const int* what) { std::printf("%d\\n", *what); }
"""


def app_with(tmp_path, main_body: str):
    app = tmp_path / "app"
    app.mkdir(parents=True)
    (app / "main.cu").write_text(textwrap.dedent(KERNEL) + textwrap.dedent(main_body))
    extract(app, ExtractOptions(jobs=1))
    return app


def test_a_reference_taken_after_the_launch_leaves_the_value_derived(tmp_path):
    app = app_with(tmp_path, """
        int main()
        {
            int rows = 96, cols = 48;
            float* v;
            cudaMalloc(&v, rows * cols * sizeof(float));
            step(v, rows, cols);                  // the launch the MEP reproduces
            timed(10, step, v, rows, cols);       // rows, cols by forwarding reference, afterwards
            report(&rows);
            return 0;
        }
    """)
    r = run("shift", "-C", app)
    assert r.exit_code == 0, r.output
    s = load_spec(app / ".mepgen" / "meps" / "shift" / "mep.yaml")
    assert not s.todo
    assert s.size(s.params[1].value) == 96 and s.size(s.params[2].value) == 48


def test_a_reference_taken_before_the_launch_stays_a_todo_and_one_in_its_loop_is_said(tmp_path):
    before = app_with(tmp_path / "a", """
        void grow(int* n) { *n = *n * 2; }
        int main()
        {
            int rows = 96, cols = 48;
            float* v;
            cudaMalloc(&v, 4096 * sizeof(float));
            grow(&rows);
            step(v, rows, cols);
            return 0;
        }
    """)
    looped = app_with(tmp_path / "b", """
        void grow(int* n) { *n = *n * 2; }
        int main()
        {
            int rows = 8, cols = 48;
            float* v;
            cudaMalloc(&v, 4096 * sizeof(float));
            for (int k = 0; k < 3; k++) {
                step(v, rows, cols);
                grow(&rows);                      // the next round's launch sees it
            }
            return 0;
        }
    """)
    r = run("shift", "-C", before)
    assert r.exit_code == 3, r.output
    s = load_spec(before / ".mepgen" / "meps" / "shift" / "mep.yaml")
    assert [t.field for t in s.todo] == ["sizes.ROWS"] and "`rows`" in s.todo[0].reason, s.todo
    assert s.size(s.params[2].value) == 48                         # cols is untouched
    r = run("shift", "-C", looped)
    assert r.exit_code == 0, r.output
    assert "in the loop" in r.output and "first iteration" in r.output
    s = load_spec(looped / ".mepgen" / "meps" / "shift" / "mep.yaml")
    assert not s.todo and s.size(s.params[1].value) == 8
