"""`mepgen mep --ask-llm`: the real openai client against a scripted chat-completions server on loopback.
The LLM's proposals for the todo fields are validated like a person's edit: good ones settle their todo and
are marked for review, bad ones stay todo with the reason, and a failing endpoint changes nothing."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from chat_server import ChatServer
from mepgen import mepbuild
from mepgen.cli import main
from mepgen.extract import ExtractOptions, extract
from mepgen.mep.todo_proposal import unsafe_expression
from mepgen.mep.todo_reply import ReplyError, parse_reply
from mepgen.spec import load_spec

KEY_ENV, KEY = "MEPGEN_TEST_KEY", "sk-test-very-secret-4242"
SOURCE = """
    #include <cuda_runtime.h>
    int pick_stride();
    struct Params { int a; float b; };
    __constant__ Params cfg;
    __device__ int slot(int i, int n) { return (i * 7919) % n; }
    __global__ void scatter(const float* in, float* out, int n, int stride)
    {
        const int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[slot(i, n)] = in[i] * cfg.b + stride;
    }
    void run_scatter(const float* in, float* out, int n, cudaStream_t s)
    {
        int stride = pick_stride();
        scatter<<<(n + 255) / 256, 256, 0, s>>>(in, out, n, stride);
    }
"""
TODO = ["sizes.N", "sizes.STRIDE", "params[1].count", "constants[0].value"]
GOOD = """n is the problem size; pick_stride() is opaque, a small stride is typical.

```yaml
sizes.N: 65536
sizes.STRIDE: 3
params[1].count: N
constants[0].value: Params{2, 0.5f}
```
"""


def answer(block: str, prose: str = "Here are my proposals.") -> dict:
    return {"content": f"{prose}\n\n```yaml\n{textwrap.dedent(block).strip()}\n```\n"}


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    app = tmp_path_factory.mktemp("llm") / "app"
    (app / "src").mkdir(parents=True)
    (app / "src" / "k.cu").write_text(textwrap.dedent(SOURCE))
    extract(app, ExtractOptions(jobs=1))
    return app


@pytest.fixture
def app(extracted, tmp_path, monkeypatch):
    """The extracted app with no MEP yet, and a configuration of mepgen's own (no user config leaks in)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.delenv("MEPGEN_CONFIG", raising=False)
    shutil.rmtree(extracted / ".mepgen" / "meps", ignore_errors=True)
    return extracted


def configure(app, base_url: str | None, **mep) -> None:
    llm = f"llm: {{base_url: '{base_url}', model: test-model, api_key_env: {KEY_ENV}, max_retries: 0, timeout_s: 10}}\n" \
        if base_url else ""
    text = llm + (f"mep: {json.dumps(mep)}\n" if mep else "")
    (app / ".mepgen" / "config.yaml").write_text(text)


def mep(app, *args):
    return CliRunner().invoke(main, ["mep", "scatter", "-C", str(app), *args])


def folder(app):
    return app / ".mepgen" / "meps" / "scatter"


def snapshot(app) -> dict[str, bytes]:
    d = folder(app)
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def ask(app, script, *args):
    with ChatServer(script) as srv:
        configure(app, srv.base_url)
        r = mep(app, "--ask-llm", *args)
    return r, srv.requests


def text_of(request) -> str:
    return "\n".join(m["content"] for m in request["json"]["messages"])


def dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"


# --- a good answer ----------------------------------------------------------------------------------------

def test_a_good_proposal_settles_every_todo_and_is_marked_for_review(app):
    r, reqs = ask(app, [{"content": GOOD}])
    assert r.exit_code == 0, r.output
    s = load_spec(folder(app) / "mep.yaml")
    assert s.todo == []
    assert (s.sizes["N"], s.sizes["STRIDE"], s.param("out").count) == (65536, 3, "N")
    assert s.constants[0].value == "Params{2, 0.5f}"
    # work.bytes named the placeholder OUT_COUNT; it follows the count the LLM gave, so the roofline has bytes.
    # `out` is inout (written only where i < n) but never read: counted once
    assert "OUT_COUNT" not in s.work.bytes and s.size(s.work.bytes) == 4 * 65536 + 4 * 65536
    text = (folder(app) / "mep.yaml").read_text()
    assert text.count("# LLM-PROPOSED(test-model): ") == 4 and "TODO(mepgen)" not in text
    assert "# LLM-PROPOSED(test-model): sizes.N = 65536 was proposed by the LLM, not inferred by mepgen: review " \
           "it (the todo was: `n` is a parameter of run_scatter(), which no source mepgen parsed calls" in text
    assert "# the LLM test-model proposed sizes.N, sizes.STRIDE, params[1].count, constants[0].value" in text
    assert "# out: inout: written only where i < n" in text          # mepgen's own notes are kept
    # the harness and inputs follow the proposal
    assert "Params{2, 0.5f}" in (folder(app) / "harness.cu").read_text()
    assert "-DMEPGEN_SIZE_N=65536" in (folder(app) / "Makefile").read_text() and "-DMEPGEN_SIZE_STRIDE=3" in (folder(app) / "Makefile").read_text()
    assert np.load(folder(app) / "data" / "in" / "out.npy").shape == (65536,)
    # named in the printout, never presented as inferred
    assert "LLM test-model proposed sizes.N = 65536: accepted, review it" in r.output
    assert "the LLM proposed (review them in mep.yaml): scatter: sizes.N; scatter: sizes.STRIDE; " \
           "scatter: params[1].count; scatter: constants[0].value" in r.output
    # what the model was asked
    assert len(reqs) == 1 and reqs[0]["json"]["model"] == "test-model"
    asked = text_of(reqs[0])
    for f in TODO:
        assert f"`{f}`" in asked
    assert "if (i < n) out[slot(i, n)] = in[i] * cfg.b + stride;" in asked           # kernel.cu
    assert "int stride = pick_stride();" in asked and "(src/k.cu:15)" in asked     # the launch site
    assert "`sizes.OUT_COUNT`" in asked and "gets no traceable value from the application" in asked
    assert KEY not in asked and reqs[0]["headers"]["authorization"] == f"Bearer {KEY}"


def test_the_json_summary_names_what_came_from_the_llm(app):
    r, _ = ask(app, [{"content": GOOD}], "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    llm = out[0]["llm"]
    assert (llm["model"], llm["error"], llm["refused"], llm["unanswered"]) == ("test-model", None, [], [])
    assert [(p["field"], p["value"], p["settles"]) for p in llm["accepted"]] == [
        ("sizes.N", 65536, ["sizes.N"]), ("sizes.STRIDE", 3, ["sizes.STRIDE"]),
        ("params[1].count", "N", ["params[1].count"]), ("constants[0].value", "Params{2, 0.5f}", ["constants[0].value"])]
    assert out[0]["todo"] == []


def test_a_placeholder_size_settles_the_count_that_names_it(app):
    """`set sizes.OUT_COUNT or write the count`: the LLM may set the placeholder, as --size may."""
    r, _ = ask(app, [answer("""
        sizes.N: 4096
        sizes.STRIDE: 1
        sizes.OUT_COUNT: 4096
        constants[0].value: Params{1, 1.0f}
    """)])
    assert r.exit_code == 0, r.output
    s = load_spec(folder(app) / "mep.yaml")
    assert s.todo == [] and s.param("out").count == "OUT_COUNT" and s.sizes["OUT_COUNT"] == 4096
    assert "LLM-PROPOSED(test-model): sizes.OUT_COUNT = 4096" in (folder(app) / "mep.yaml").read_text()


@pytest.mark.nvcc
def test_the_mep_the_llm_completed_compiles(app, tmp_path):
    r, _ = ask(app, [{"content": GOOD}])
    assert r.exit_code == 0, r.output
    spec = load_spec(folder(app) / "mep.yaml")
    cmd = mepbuild.nvcc_command(spec, folder(app), folder(app) / "kernel.cu", tmp_path / "mep")
    built = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    assert (tmp_path / "mep").is_file()


# --- bad answers ------------------------------------------------------------------------------------------

def test_invalid_values_stay_todo_with_what_was_proposed_and_why(app):
    bad = answer("""
        sizes.N: "4096"
        sizes.STRIDE: 3
        params[1].count: M * 2
        constants[0].value: 'Params{2, 0.5f}, system("rm -rf ~")'
        sizes.NOPE: 12
    """)
    again = answer("""
        sizes.N: -5
        params[1].count: N + K
        constants[0].value: Params{exit(1), 0.5f}
    """)
    r, reqs = ask(app, [bad, again])
    assert r.exit_code == 3
    s = load_spec(folder(app) / "mep.yaml")
    assert s.sizes["STRIDE"] == 3 and s.sizes["N"] == 1048576 and s.param("out").count == "OUT_COUNT"
    todo = {t.field: t.reason for t in s.todo}
    assert list(todo) == ["sizes.N", "params[1].count", "constants[0].value"]
    assert todo["sizes.N"].endswith("; the LLM (test-model) proposed sizes.N = -5, refused: a size must be "
                                    "positive, not -5")
    assert "the LLM (test-model) proposed params[1].count = N + K, refused: params[1].count: cannot evaluate " \
           "'N + K': unknown size symbol(s) K" in todo["params[1].count"]
    assert "the LLM (test-model) proposed constants[0].value = Params{exit(1), 0.5f}, refused: constants[0].value " \
           "'Params{exit(1), 0.5f}' uses exit, which is neither a size nor a name kernel.cu uses" \
           in todo["constants[0].value"]
    text = (folder(app) / "mep.yaml").read_text()
    assert text.count("LLM-PROPOSED(test-model)") == 1 and "sizes.STRIDE = 3" in text
    assert "system" not in (folder(app) / "harness.cu").read_text()
    assert "mep.yaml needs a person for: scatter: sizes.N; scatter: params[1].count; scatter: constants[0].value" \
        in r.output
    # the first refusals went back to the model, once, asking again for what is still open
    assert len(reqs) == 2
    repair = reqs[1]["json"]["messages"]
    assert repair[-2] == {"role": "assistant", "content": bad["content"]}
    back = repair[-1]["content"]
    assert "`sizes.N: '4096'` was refused: sizes.N: must be an integer, not str '4096'" in back
    assert "`params[1].count: M * 2` was refused: params[1].count: cannot evaluate 'M * 2': unknown size symbol(s) M" in back
    assert "`constants[0].value: Params{2, 0.5f}, system(\"rm -rf ~\")` was refused: constants[0].value 'Params{2, 0.5f}, system(\"rm -rf ~\")' holds \": only one expression" in back
    assert "`sizes.NOPE: 12` was refused: not a field that was asked for" in back
    assert "`sizes.N`, `params[1].count`, `constants[0].value`" in back and "`sizes.STRIDE`" not in back


def test_an_unknown_key_inside_a_value_is_refused(app):
    r, _ = ask(app, [answer("constants[0].value: {a: 2, b: 0.5}\nsizes.N: 8\nsizes.STRIDE: [1, 2]"),
                     answer("constants[0].value: null\nsizes.STRIDE: 2.5")])
    assert r.exit_code == 3
    todo = {t.field: t.reason for t in load_spec(folder(app) / "mep.yaml").todo}
    assert list(todo) == ["sizes.STRIDE", "params[1].count", "constants[0].value"]
    assert "proposed sizes.STRIDE = 2.5, refused: sizes.STRIDE: must be an integer, not float 2.5" in todo["sizes.STRIDE"]
    assert "proposed constants[0].value = {a: 2, b: 0.5}, refused: constants[0].value: must be a string or an " \
           "integer or a number" in todo["constants[0].value"]
    assert "LLM" not in todo["params[1].count"]          # it was not answered: the reason is mepgen's own


@pytest.mark.parametrize("script", [
    [{"content": "I think N is about a million."}, {"content": "```yaml\n- sizes.N\n- 4096\n```"}],
    [{"content": "```yaml\nsizes.N: 1\n```\n```yaml\nsizes.N: 2\n```"}, {"content": "```yaml\nsizes.N: [\n```"}],
    [{"raw": "this is not JSON"}],
], ids=["no-block-then-a-list", "two-blocks-then-bad-yaml", "garbage-body"])
def test_an_unusable_reply_leaves_the_mep_as_a_plain_run_writes_it(app, script):
    configure(app, None)
    assert mep(app).exit_code == 3
    plain = snapshot(app)
    r, reqs = ask(app, script)
    assert r.exit_code == 3
    assert snapshot(app) == plain
    assert "mepgen: warning:" in r.output and "127.0.0.1" in r.output and KEY not in r.output
    assert len(reqs) == len(script)
    if len(script) == 2:
        assert "gave no usable answer" in r.output
        assert "Your answer could not be used" in reqs[1]["json"]["messages"][-1]["content"]


def test_a_partial_answer_settles_what_it_answers(app):
    r, reqs = ask(app, [answer("sizes.N: 4096\nsizes.STRIDE: null\nconstants[0].value: null")])
    assert r.exit_code == 3 and len(reqs) == 1          # nothing refused: no second round
    s = load_spec(folder(app) / "mep.yaml")
    assert s.sizes["N"] == 4096
    assert [t.field for t in s.todo] == ["sizes.STRIDE", "params[1].count", "constants[0].value"]
    assert all("LLM" not in t.reason for t in s.todo)
    out = json.loads(mep_json(app, [answer("sizes.N: 4096")]))[0]["llm"]
    assert [p["field"] for p in out["accepted"]] == ["sizes.N"]
    assert out["unanswered"] == ["sizes.STRIDE", "params[1].count", "constants[0].value"]


def mep_json(app, script) -> str:
    r, _ = ask(app, script, "--json")
    return r.stdout


MIXED = """
    #include <cuda_runtime.h>
    #define N 4096
    int blocks_for(int n);
    struct Mixed { int id; float w; };
    __global__ void scale(float* x, const Mixed* m, int n)
    {
        const int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= m[i].w;
    }
    void go(float* x, const Mixed* m) { scale<<<blocks_for(N), 256>>>(x, m, N); }
"""


def test_dtype_and_launch_proposals_are_checked_and_a_repair_can_fix_them(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("MEPGEN_CONFIG", raising=False)
    app = tmp_path / "mixed"
    (app / "src").mkdir(parents=True)
    (app / "src" / "k.cu").write_text(textwrap.dedent(MIXED))
    extract(app, ExtractOptions(jobs=1))
    with ChatServer([answer("params[1].dtype: float32\nlaunch: {grid: ['(N + 255) / 256'], threads: [256]}"),
                     answer("params[1].dtype: uint64\nlaunch: {grid: ['(N + 255) / 256'], block: [256]}")]) as srv:
        configure(app, srv.base_url)
        r = CliRunner().invoke(main, ["mep", "scale", "--ask-llm", "-C", str(app)])
    assert r.exit_code == 0, r.output
    s = load_spec(app / ".mepgen" / "meps" / "scale" / "mep.yaml")
    assert s.todo == [] and s.param("m").dtype == "uint64"
    assert (s.launch.grid, s.launch.block) == (["(N + 255) / 256"], ["256"])
    text = (app / ".mepgen" / "meps" / "scale" / "mep.yaml").read_text()
    assert "# LLM-PROPOSED(test-model): launch = {grid: [(N + 255) / 256], block: [256]} was proposed" in text
    first = text_of(srv.requests[0])
    assert "`const Mixed *` (8-byte elements) is not a numeric element type" in first
    assert "`launch` (now `{grid: ['1'], block: ['256'], shared_mem: '0', callee: scale}`" in first
    again = srv.requests[1]["json"]["messages"][-1]["content"]
    assert "`params[1].dtype: float32` was refused: float32 has 4-byte elements, the kernel's have 8" in again
    assert "launch must be a mapping of grid, block, shared_mem" in again
    assert "LLM test-model proposed params[1].dtype = 'uint64': accepted, review it" in r.output


# --- the endpoint ---------------------------------------------------------------------------------------

def test_a_server_that_is_down_changes_nothing(app):
    configure(app, None)
    assert mep(app).exit_code == 3
    plain = snapshot(app)
    url = dead_url()
    configure(app, url)
    r = mep(app, "--ask-llm")
    assert r.exit_code == 3
    assert snapshot(app) == plain
    warnings = [line for line in r.output.splitlines() if line.startswith("mepgen: warning:")]
    assert len(warnings) == 1 and url in warnings[0] and "(unreachable)" in warnings[0]
    assert KEY not in r.output
    assert "mep.yaml needs a person for: scatter: sizes.N; scatter: sizes.STRIDE" in r.output


def test_ask_llm_needs_an_endpoint(app):
    configure(app, None)
    r = mep(app, "--ask-llm")
    assert r.exit_code == 2
    assert "mepgen: --ask-llm (mep.ask_llm) needs an LLM endpoint: export OPENAI_BASE_URL and MEPGEN_LLM_MODEL" in r.output
    assert not folder(app).exists()
    r = mep(app, "--ask-llm", "--refresh")
    assert r.exit_code == 2 and "--ask-llm applies to a plain run or --force" in r.output


def test_the_config_key_asks_and_the_flag_overrides_it(app):
    with ChatServer([{"content": GOOD}]) as srv:
        configure(app, srv.base_url, ask_llm=True)
        r = mep(app)
        assert r.exit_code == 0, r.output
        assert len(srv.requests) == 1
        r = mep(app, "--no-ask-llm")
        assert r.exit_code == 3 and len(srv.requests) == 1
    assert "LLM-PROPOSED" not in (folder(app) / "mep.yaml").read_text()


# --- the heatcg example: the CG kernels' sizes ------------------------------------------------------------

def test_heatcg_spmv_sizes_from_the_llm(heatcg_copy, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("MEPGEN_CONFIG", raising=False)
    extract(heatcg_copy, ExtractOptions(jobs=2))
    with ChatServer([answer("sizes.NROWS: 4096\nsizes.NNZ: 20000")]) as srv:
        configure(heatcg_copy, srv.base_url)
        r = CliRunner().invoke(main, ["mep", "cg::spmv_csr", "--ask-llm", "-C", str(heatcg_copy)])
    assert r.exit_code == 0, r.output
    d = heatcg_copy / ".mepgen" / "meps" / "cg.spmv_csr"
    s = load_spec(d / "mep.yaml")
    assert (s.sizes["NROWS"], s.sizes["NNZ"], s.todo) == (4096, 20000, [])
    row_ptr = np.load(d / "data" / "in" / "row_ptr.npy")
    assert row_ptr.shape == (4097,) and row_ptr[-1] == 20000
    asked = text_of(srv.requests[0])
    assert "`sizes.NROWS`" in asked and "`sizes.NNZ`" in asked and "spmv_csr<<<rows_blocks" in asked
    assert "__global__ void spmv_csr" in asked


# --- the parts --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("expr, problem", [
    ("Params{N, 0.5f}", None),
    ("static_cast<int>(N * 2) + sizeof(float)", None),
    ("heat::Grid{N, N, 1.0f, 1.0f}", None),
    ("N; exit(0)", "holds ;"),
    ('printf("x")', "holds \""),
    ("N = 3", "assigns"),
    ("(N", "unbalanced"),
    ("N)(", "unbalanced"),
    ("std::system(0)", "uses system"),
    ("#define X", "holds #"),
])
def test_compiled_expressions_are_checked(expr, problem):
    got = unsafe_expression(expr, {"N", "Params", "heat", "Grid"})
    assert got is None if problem is None else (got is not None and problem in got), got


def test_replies_are_parsed_strictly():
    assert parse_reply("ok\n```yaml\nsizes.N: 4\nparams[1].count: N + 1\n```\n") == \
        {"sizes.N": 4, "params[1].count": "N + 1"}
    assert parse_reply('```json\n{"sizes.N": 4}\n```') == {"sizes.N": 4}
    for bad, why in [("no block", "no ```yaml block"), ("```yaml\nsizes.N: 1\nsizes.N: 2\n```", "duplicate key"),
                     ("```yaml\n[1, 2]\n```", "must be a mapping"), ("```yaml\n{}\n```", "must be a mapping"),
                     ("```cuda\nint x;\n```", "no ```yaml block")]:
        with pytest.raises(ReplyError, match=why):
            parse_reply(bad)


def test_the_option_is_in_the_help():
    r = CliRunner().invoke(main, ["mep", "--help"])
    assert r.exit_code == 0 and "--ask-llm / --no-ask-llm" in r.output and "validated like a person's edit" in r.output
