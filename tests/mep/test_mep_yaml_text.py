"""mep.yaml stays valid YAML whatever text the application's source puts into it: notes quote conditions
written over several lines, with `:` and `#` in them."""
from __future__ import annotations

import yaml

from mepgen.spec import load_spec
from mep_apps import make_app, run


def test_a_guard_written_over_several_lines_stays_one_comment(tmp_path):
    """The note of a count quotes the kernel's guard; a guard broken over two lines (a ternary's `:` on the
    second) once ended the comment and left the rest as YAML that does not parse."""
    app = make_app(tmp_path, """
        #define W 512
        #define H 256
        #define EDGE 2
        __global__ void smooth(float* dst, const float* src, int w, int h)
        {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            int y = blockIdx.y * blockDim.y + threadIdx.y;
            int at = y * w + x;
            if ((x >= EDGE && x < w - EDGE) &&
                  (y >= EDGE && y < (h > EDGE ? h - EDGE : 0))) {   // # not a comment of mep.yaml
                dst[at] = 0.5f * (src[at - 1] + src[at + 1]);
            }
        }
        void go()
        {
            float *dst, *src;
            cudaMalloc(&dst, sizeof(float) * W * H);
            cudaMalloc(&src, sizeof(float) * W * H);
            dim3 b(16, 16);
            dim3 g(W / 16, H / 16);
            smooth<<<g, b>>>(dst, src, W, H);
        }
    """)
    r = run("smooth", "-C", app)
    assert r.exit_code == 0, r.output
    path = app / ".mepgen" / "meps" / "smooth" / "mep.yaml"
    text = path.read_text()
    assert yaml.safe_load(text)["todo"] == []
    notes = [line for line in text.splitlines() if line.lstrip().startswith("# dst:")]
    assert len(notes) == 1 and "(y >= EDGE" in notes[0]
    assert load_spec(path).param("dst").count == "W * H"
