"""march_z on the 3D stencils of tests/library_idioms/stencil_forms (written here): a thread walks a chunk of planes,
its z neighbours in a register queue and its in-plane neighbours in a shared tile of the plane, for every field the
stencil reads that way. The app is extracted and cut into MEPs as a user would; the rewrite of the two-field wave
step runs on the CPU (each block's threads at once, real barriers) at sizes no block or chunk divides, against the
original: every output the same float."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from library_fixtures import assert_same_on_cpu, load
from mepgen.optimize.dry_run import plan
from mepgen.optimize.library.march_z import MarchZ
from mepgen.optimize.library.source import KernelSource, Refused
from mepgen.spec import load_spec

APP = Path(__file__).parent / "library_idioms" / "stencil_forms"


@pytest.fixture(scope="module")
def meps(tmp_path_factory):
    app = tmp_path_factory.mktemp("march") / "stencil_forms"
    shutil.copytree(APP, app)
    for args in (["extract", "."], ["mep", "wave_pair"], ["mep", "box7"]):
        done = subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=app, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    return {m.name: m for m in (app / ".mepgen" / "meps").iterdir()}


def test_both_fields_march_with_their_own_radius(meps):
    src, spec, launch = load(meps["wave_pair"])
    t = MarchZ()
    assert t.space(src, spec, launch) == {"block": ["32x8", "32x4", "64x4", "32x16", "16x16"], "chunk": [32, 16, 64],
                                          "vec": [4, 1]}
    rw = t.apply(src, spec, launch, {"block": "32x8", "chunk": 32, "vec": 1})
    body = " ".join(rw.text[rw.text.index("void wave_pair"):].split())
    # p: radius 2 (a 5-value queue, a 36 x 12 tile), r: radius 1 (3 values, 34 x 10); w and vel stay global reads
    assert "float mepgen_q0[5];" in body and "__shared__ float mepgen_s0[432];" in body
    assert "float mepgen_q1[3];" in body and "__shared__ float mepgen_s1[340];" in body
    assert "w[1] * (mepgen_s0[mepgen_c0-1] + mepgen_s0[mepgen_c0+1] + mepgen_s0[mepgen_c0-36]" in body
    assert "mepgen_q0[0] + mepgen_q0[4]" in body and "vel[AT3(x, y, z)] * lp" in body
    assert "unsigned z = mepgen_z;" in body and body.count("__syncthreads();") == 2
    assert "p[AT3" not in body and "r[AT3" not in body
    assert rw.launch == {"grid": ["(DX + 31) / 32", "(DY + 7) / 8", "((DZ) + 31) / 32"],
                         "block": ["32", "8", "1"], "shared_mem": "0"}
    assert "p: 5-value queue along z, 36x12 tile of the plane (14 reads)" in rw.explanation
    # 4 x per thread: the tile's rows read 16 bytes at a time into registers, each point one lane of them; the x
    # halo rounded up to 4 (136 = 4 * 32 + 2 * 4) so that the rows stay aligned
    v4 = " ".join(t.apply(src, spec, launch, {"block": "32x8", "chunk": 32, "vec": 4}).text.split())
    assert "__shared__ __align__(16) float mepgen_s0[1632];" in v4 and "float4 mepgen_q0[5];" in v4
    assert "const float4 mepgen_r0_0_m1 = *reinterpret_cast<const float4 *>(&mepgen_s0[((int)threadIdx.y + 2) * " \
           "136 + 4 + (int)threadIdx.x * 4 + -4]);" in v4
    assert "unsigned x = mepgen_x0 + 3;" in v4 and v4.count("unsigned x = mepgen_x0 +") == 4
    assert "w[2] * (mepgen_r0_0_m1.z + mepgen_r0_0_0.z + mepgen_r0_m2_0.x" in v4        # point 0: x - 2, x + 2, y - 2
    # a deeper original block: the grid's z threads (blocks times depth) are what the chunks cover
    box = MarchZ().apply(*load(meps["box7"]), {"block": "32x4", "chunk": 16, "vec": 1})
    assert box.launch["grid"][2] == "((DZ / 2) * (2) + 15) / 16" and box.launch["block"] == ["32", "4", "1"]


WAVE_MAIN = """
    const int n = DX * DY * DZ;
    std::vector<float> p(n), r(n), vel(n), w = {0.5f, 0.25f, -0.125f}, p0(n), p1(n), r0(n), r1(n);
    srand(7);
    for (int i = 0; i < n; i++) {
        p[i] = float(rand() % 17) / 8 - 1; r[i] = float(rand() % 13) / 4 - 1; vel[i] = float(rand() % 5) / 4;
        p0[i] = p1[i] = float(rand() % 7); r0[i] = r1[i] = float(rand() % 3);
    }
    launch3((DX + 15) / 16, (DY + 15) / 16, DZ, 16, 16, 1,
            [&] { before::wave_pair(p.data(), r.data(), w.data(), vel.data(), p0.data(), r0.data()); });
    launch3(GRID_AFTER, [&] { after::wave_pair(p.data(), r.data(), w.data(), vel.data(), p1.data(), r1.data()); });
    for (int i = 0; i < n; i++) if (p0[i] != p1[i] || r0[i] != r1[i]) { printf("differ at %d\\n", i); return 1; }
    return 0;
"""


@pytest.mark.parametrize("params", [{"block": "32x8", "chunk": 16, "vec": 1}, {"block": "16x16", "chunk": 32, "vec": 1},
                                    {"block": "32x8", "chunk": 16, "vec": 4}, {"block": "16x16", "chunk": 32, "vec": 4}])
def test_the_march_computes_every_point_as_before(meps, tmp_path, params):
    src, spec, launch = load(meps["wave_pair"])
    rw = MarchZ().apply(src, spec, launch, params)
    cut = lambda text: text[text.index("__global__ void wave_pair"):].split("\n}\n")[0] + "\n}\n"
    defines = "#define DX 37\n#define DY 19\n#define DZ 41\n#define AT3(x, y, z) ((z) * DX * DY + (y) * DX + (x))\n"
    grid = ", ".join([*rw.launch["grid"], *rw.launch["block"]])
    assert_same_on_cpu(tmp_path, cut((meps["wave_pair"] / "kernel.cu").read_text()), cut(rw.text),
                       WAVE_MAIN.replace("GRID_AFTER", grid), defines, blocks=True)


def test_march_z_refuses(meps):
    src, spec, launch = load(meps["wave_pair"])
    text = src.text

    def why(old, new):
        assert old in text
        with pytest.raises(Refused) as e:
            MarchZ().space(KernelSource(text.replace(old, new), spec), spec, launch)
        return str(e.value)

    assert "not a star stencil" in why("+ p[AT3(x, y, z + 2)]", "+ p[AT3(x + 1, y, z + 2)]")
    assert "besides its z index" in why("float lp = w[0]", "float lp = threadIdx.z * w[0]")
    assert "return" in why("float lp = w[0]", "for (int k = 0; k < 2; ++k) if (vel[AT3(x, y, z)] == k) return; "
                                              "float lp = w[0]")
    with pytest.raises(Refused, match="not a 3D stencil"):
        MarchZ().space(*_two_d(meps))


def _two_d(meps):
    """heat_source of the same app, a 2D stencil."""
    app = next(iter(meps.values())).parents[2]
    done = subprocess.run([sys.executable, "-m", "mepgen.cli", "mep", "heat_source"], cwd=app, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return load(app / ".mepgen" / "meps" / "heat_source")


def test_the_plan_tries_the_march_after_the_tile_and_the_rows(meps):
    spec = load_spec(meps["wave_pair"] / "mep.yaml")
    p = plan(spec, (meps["wave_pair"] / "kernel.cu").read_text())
    assert p.structural == ["tile_stencil", "stencil_rows", "march_z"], p.refusals
