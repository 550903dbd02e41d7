"""Prompt templates render the kernel, spec, GPU, evidence and inherited patterns; undefined is an error."""
from __future__ import annotations

import jinja2
import pytest

from mepgen.llm.prompts import render
from mepgen.optimize.llm.prompts import propose_messages, repair_messages

CTX = dict(
    kernel={"name": "cg::axpy"}, gpu={"name": "NVIDIA H200", "cc": "9.0", "peak_gbps": 4300.0, "peak_gflops": 60000.0},
    launch={"grid": ["16384"], "block": ["256"], "shared_mem": "0"}, launch_changes="",
    sizes={"N": 4194304}, params=[{"ctype": "int", "name": "n", "role": "scalar", "count": None, "dtype": "int32", "value": "N"},
                                   {"ctype": "const T *", "name": "x", "role": "in", "count": "N", "dtype": "float32", "value": None}],
    symbols=[], observed=[], varies=[],
    tolerance={"y": {"rtol": 1e-5, "atol": 1e-6}},
    best={"median_ms": 0.0123, "achieved_gbps": 4000.0, "bandwidth_pct": 93.0, "achieved_gflops": None,
          "profile": {"dram %": 91.2}},
    kernel_cu="__global__ void axpy(int n) {}",
    patterns=[{"kernel": "cg::xpay", "gpu": "NVIDIA H200", "change": "vectorized float4 loads", "speedup": 1.31}],
    history=[{"change": "unroll 4", "outcome": "compiled, 1.01x: within noise"}],
)


def test_propose_prompt_carries_everything():
    msgs = propose_messages(**CTX)
    assert [m["role"] for m in msgs] == ["system", "user"]
    user = msgs[1]["content"]
    for needle in ("cg::axpy", "NVIDIA H200", "4300 GB/s", "N=4194304", "`const T * x`: in, N elements of float32",
                   "y rtol 1e-05", "0.0123 ms", "93% of peak", "dram % 91.2", "__global__ void axpy",
                   "cg::xpay on NVIDIA H200: vectorized float4 loads — 1.31x", "unroll 4: compiled, 1.01x"):
        assert needle in user, needle
    assert "SEARCH/REPLACE" in msgs[0]["content"]


def test_propose_prompt_names_the_device_variables_the_kernel_writes():
    """Results left in `__device__` variables are outputs too: the model is told to keep writing them."""
    user = propose_messages(**{**CTX, "symbols": [{"name": "tally::seen", "count": "32", "dtype": "int32"}]})[1]["content"]
    assert "`__device__` variables" in user and "- `tally::seen`: 32 elements of int32" in user
    assert "`__device__` variables" not in propose_messages(**CTX)[1]["content"]


def test_propose_prompt_names_the_applications_other_launch_configurations():
    """Only the captured launch is verified in the MEP: the model is told the others, and not to assume a block."""
    observed = [{"grid": [16384, 1, 1], "block": [256, 1, 1], "launches": 9},
                {"grid": [65536, 1, 1], "block": [64, 1, 1], "launches": 1}]
    user = propose_messages(**{**CTX, "observed": observed})[1]["content"]
    assert ("launches this kernel with 2 configurations: grid (16384, 1, 1) block (256, 1, 1); grid (65536, 1, 1) "
            "block (64, 1, 1).") in user
    assert "never assume one block or grid size" in user
    assert "configurations" not in propose_messages(**CTX)[1]["content"]
    user = propose_messages(**{**CTX, "varies": ["threads"]})[1]["content"]
    assert "in a loop that changes threads from one round to the next" in user


def test_repair_prompt_hands_back_the_evidence():
    msgs = repair_messages([{"role": "user", "content": "p"}], "bad reply", kernel={"name": "cg::axpy"},
                           stage="compile", message="kernel.cu(7): error: identifier \"fmaa\" is undefined",
                           mismatch=None, proposed="__global__ void axpy() { fmaa(); }")
    assert msgs[-2] == {"role": "assistant", "content": "bad reply"}
    assert "failed at the compile stage" in msgs[-1]["content"] and "fmaa" in msgs[-1]["content"]


def test_missing_variable_is_an_error():
    with pytest.raises(jinja2.UndefinedError):
        render("propose", kernel={"name": "k"})
