"""Strict reply parsing and the guards on untrusted kernel code."""
from __future__ import annotations

import pytest

from mepgen.optimize.llm.guard import check
from mepgen.optimize.llm.replies import ReplyError, parse_reply

KERNEL = '''#include <cuda_runtime.h>
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = a * x[i] + y[i];
    }
}
}
'''


def test_search_replace_edits_apply_in_order():
    reply = '''Unroll by two.
<<<<<<< SEARCH
        y[i] = a * x[i] + y[i];
=======
        y[i] = fma(a, x[i], y[i]);
>>>>>>> REPLACE
<<<<<<< SEARCH
    const int stride = blockDim.x * gridDim.x;
=======
    const int stride = blockDim.x * gridDim.x;  // grid-stride
>>>>>>> REPLACE
'''
    p = parse_reply(reply, KERNEL)
    assert p.mode == "edits" and p.edits == 2 and p.strategy == "Unroll by two."
    assert "fma(a, x[i], y[i])" in p.text and "// grid-stride" in p.text and "a * x[i]" not in p.text


@pytest.mark.parametrize("reply, message", [
    ("<<<<<<< SEARCH\n    not there\n=======\nx\n>>>>>>> REPLACE\n", "edit 1: the SEARCH text is not in kernel.cu"),
    ("<<<<<<< SEARCH\n}\n=======\n} // end\n>>>>>>> REPLACE\n", "occurs 3 times"),
    ("<<<<<<< SEARCH\n        y[i] = a * x[i] + y[i];\n>>>>>>> REPLACE\n", "without its '======='"),
    ("<<<<<<< SEARCH\n        y[i] = a * x[i] + y[i];\n=======\nfoo\n", "without its '>>>>>>> REPLACE'"),
    ("Sure! I would use shared memory here.", "the reply has no code"),
    ("```cuda\n__global__ void a() {}\n```\n```cuda\n__global__ void b() {}\n```", "2 code blocks"),
    ("```cuda\nint helper() { return 1; }\n```", "holds no __global__ kernel"),
    ("```cuda\n__global__ void a() {", "opened but never closed"),
])
def test_malformed_replies_are_errors_for_the_model(reply, message):
    with pytest.raises(ReplyError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_reply(reply, KERNEL)


def test_whole_kernel_reply():
    reply = "Vectorized.\n```cuda\n" + KERNEL.replace("a * x[i] + y[i]", "fma(a, x[i], y[i])") + "```\n"
    p = parse_reply(reply, KERNEL)
    assert p.mode == "whole" and "fma(" in p.text and p.strategy == "Vectorized."


def test_guard_accepts_device_code_and_refuses_host_code(tmp_path):
    ok = KERNEL.replace("y[i] = a * x[i] + y[i];", "y[i] = twice(a) * x[i] + y[i];").replace(
        "namespace cg {", "namespace cg {\n__device__ float twice(float v) { return 2 * v; }\n"
                          "template <typename T> __device__ T twice(T v) { return v + v; }")
    assert check(KERNEL, ok, "cg::axpy", tmp_path, []) == []
    host = KERNEL + "int main() { return 0; }\n"
    assert any("host function main()" in p for p in check(KERNEL, host, "cg::axpy", tmp_path, []))
    inc = "#include <cstdlib>\n" + KERNEL
    assert any("new #include of cstdlib" in p for p in check(KERNEL, inc, "cg::axpy", tmp_path, []))
    sysc = KERNEL.replace("y[i] = a * x[i] + y[i];", "system(\"rm -rf /\");")
    assert any("calls system()" in p for p in check(KERNEL, sysc, "cg::axpy", tmp_path, []))
    sig = KERNEL.replace("int n, T a", "long n, T a")
    assert any("signature changed" in p for p in check(KERNEL, sig, "cg::axpy", tmp_path, []))
    gone = KERNEL.replace("void axpy(", "void axpy2(")
    assert any("kernel cg::axpy is missing" in p for p in check(KERNEL, gone, "cg::axpy", tmp_path, []))
