"""Values of the program's data, not of its source: a size that is the distance between two pointers, an
element of a host vector at a loop's index, or an object's member the program changes in several places.
Static reading cannot give them; the todo says which, with the kind `runtime` (capture completes them), so
that it is not counted as a value mepgen merely failed to trace."""
from __future__ import annotations

from mepgen.spec import load_spec
from mep_apps import make_app, run

_KERNEL = """
    #include <vector>
    __global__ void clear(int* v, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) v[i] = 0;
    }
"""


def _todo(app, field):
    r = run("clear", "-C", app)
    assert r.exit_code == 3, r.output
    s = load_spec(app / ".mepgen" / "meps" / "clear" / "mep.yaml")
    return next(t for t in s.todo if t.field == field)


def test_a_distance_between_pointers(tmp_path):
    app = make_app(tmp_path, _KERNEL + """
        int* keep_positive(int* first, int* last);      // defined elsewhere: returns the new end
        int main()
        {
            int* h = new int[4096];
            int* end = keep_positive(h, h + 4096);
            int kept = end - h;
            int* d;
            cudaMalloc(&d, kept * sizeof(int));
            clear<<<(kept + 255) / 256, 256>>>(d, kept);
            return 0;
        }
    """)
    t = _todo(app, "sizes.N")
    assert t.kind == "runtime" and "distance between two pointers" in t.reason


def test_an_element_of_a_host_vector_at_a_loop_index(tmp_path):
    app = make_app(tmp_path, _KERNEL + """
        void levels(const std::vector<int>& start, int* d)
        {
            for (int l = 0; l + 1 < (int)start.size(); l++) {
                int width = start[l + 1] - start[l];
                clear<<<(width + 127) / 128, 128>>>(d + start[l], width);
            }
        }
        int main() { std::vector<int> s(10); int* d; cudaMalloc(&d, 1 << 20); levels(s, d); return 0; }
    """)
    t = _todo(app, "sizes.N")
    assert t.kind == "runtime" and "element of a host container" in t.reason


def test_a_member_the_program_keeps_changing(tmp_path):
    app = make_app(tmp_path, _KERNEL + """
        struct Graph {
            int nodes = 0;
            int* d = nullptr;
            void grow(int k) { nodes += k; }
            void shrink() { nodes = nodes / 2; }
            void reset() { clear<<<(nodes + 255) / 256, 256>>>(d, nodes); }
        };
        int main() { Graph g; g.grow(100); g.shrink(); g.reset(); return 0; }
    """)
    r = run("clear", "-C", app)
    s = load_spec(app / ".mepgen" / "meps" / "clear" / "mep.yaml")
    kinds = {t.kind for t in s.todo}
    assert "runtime" in kinds, [(t.field, t.reason) for t in s.todo]
    assert any("Graph::nodes" in t.reason and "changes in 2 places" in t.reason for t in s.todo)


def test_a_count_over_host_data_and_a_gpu_property(tmp_path):
    """`if (mask[i] == 1) ones++;` in a loop: the count depends on the data; `prop.multiProcessorCount`: on the
    GPU the program runs on. Both are run-time values, said so at their todos."""
    app = make_app(tmp_path, _KERNEL + """
        int main()
        {
            int* mask = new int[1000];
            for (int i = 0; i < 1000; i++) mask[i] = i % 3;
            int ones = 0;
            for (int i = 0; i < 1000; i++)
                if (mask[i] == 1) ones++;
            cudaDeviceProp prop;
            cudaGetDeviceProperties(&prop, 0);
            int blocks = prop.multiProcessorCount;
            int* d;
            cudaMalloc(&d, ones * sizeof(int));
            clear<<<blocks, 256>>>(d, ones);
            return 0;
        }
    """)
    r = run("clear", "-C", app)
    assert r.exit_code == 3, r.output
    s = load_spec(app / ".mepgen" / "meps" / "clear" / "mep.yaml")
    by = {t.field: t for t in s.todo}
    ones = next(t for f, t in by.items() if f.startswith("sizes.") and "ones" in t.reason)
    assert ones.kind == "runtime" and "element of a host buffer" in ones.reason
    blocks = next(t for f, t in by.items() if "multiProcessorCount" in t.reason)
    assert blocks.kind == "runtime" and "property of the GPU" in blocks.reason


def test_a_mean_over_host_data_through_a_temporary(tmp_path):
    """C89 style: `tmp` declared before the loop, `tmp = img[i]; sum += tmp;` in it, then a scalar from the
    sum: computed from the image, one step back, so a run-time value."""
    app = make_app(tmp_path, """
        #include <cstdlib>
        __global__ void shade(float* v, int n, float level)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) v[i] *= level;
        }
        int main()
        {
            int n = 4096, i;
            float tmp, sum = 0.0f, level;
            float* img = (float*) malloc(n * sizeof(float));
            for (i = 0; i < n; i++) img[i] = rand() / (float) RAND_MAX;
            for (i = 0; i < n; i++) {
                tmp = img[i];
                sum += tmp;
            }
            level = sum / n;
            float* d;
            cudaMalloc(&d, n * sizeof(float));
            shade<<<(n + 255) / 256, 256>>>(d, n, level);
            return 0;
        }
    """)
    r = run("shade", "-C", app)
    s = load_spec(app / ".mepgen" / "meps" / "shade" / "mep.yaml")
    level = next(t for t in s.todo if t.field == "params[2].value")
    assert level.kind == "runtime", level.reason
