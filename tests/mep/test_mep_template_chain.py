"""Template arguments followed through a chain of function templates: the kernel is launched from one template
whose arguments C++ deduces at a call inside another template, which the application instantiates explicitly
with several types; scalars built from the outer template's type parameter (`real(3.0)`) are traced too."""
from __future__ import annotations

from mepgen.spec import load_spec
from mep_apps import make_app, run

APP = """
    #define SIDE 128
    template <typename V>
    __global__ void blend(V* dst, const V* src, int n, V w, V z)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) dst[i] = w * src[i] + z * dst[i];
    }
    template <typename V>
    void launch_blend(V* dst, const V* src, int n, V w, V z)
    {
        blend<<<(n + 127) / 128, 128>>>(dst, src, n, w, z);
    }
    template <typename real>
    void experiment(int n)
    {
        const real w = real(3.0);
        const real z = real(0.25);
        real *dst, *src;
        cudaMalloc(&dst, sizeof(real) * n);
        cudaMalloc(&src, sizeof(real) * n);
        launch_blend(dst, src, n, w, z);
    }
    int main()
    {
        experiment<double>(SIDE * SIDE);
        experiment<float>(SIDE * SIDE);
        return 0;
    }
"""


def test_arguments_deduced_in_one_template_and_given_explicitly_to_the_outer_one(tmp_path):
    app = make_app(tmp_path, APP)
    r = run("blend", "-C", app)
    assert r.exit_code == 0, r.output
    path = app / ".mepgen" / "meps" / "blend" / "mep.yaml"
    s = load_spec(path)
    assert s.launch.callee == "blend<double>"
    assert [(p.name, p.dtype) for p in s.params][:2] == [("dst", "float64"), ("src", "float64")]
    assert s.param("w").value == "double(3.0)" and s.param("z").value == "double(0.25)"
    text = path.read_text()
    assert "experiment() is instantiated as <double>, <float>; this MEP uses <double>" in text


def test_an_outer_template_nobody_instantiates_leaves_a_todo(tmp_path):
    """Without the calls in main nothing gives `real`: the template argument stays a todo, never a guess."""
    app = make_app(tmp_path, APP.replace("experiment<double>(SIDE * SIDE);", "").replace(
        "experiment<float>(SIDE * SIDE);", ""))
    r = run("blend", "-C", app)
    assert r.exit_code == 3
    assert any(t.field == "launch" for t in load_spec(app / ".mepgen" / "meps" / "blend" / "mep.yaml").todo)
