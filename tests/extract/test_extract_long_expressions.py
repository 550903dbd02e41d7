"""No quadratic work on long expressions: an operator is asked of libclang, not read from the tokens of the
whole expression it heads, and AST walks do not recurse as deep as the expression nests."""
from __future__ import annotations

import textwrap

from mepgen.extract import ExtractOptions, extract
from mepgen.mep.syntax import operator_of
from mepgen.parsing import clang


def test_operators_without_tokenizing(tmp_path, monkeypatch):
    src = tmp_path / "ops.cu"
    src.write_text("int f(int a, int *p) { a += 2; a = a << 1; return -a + *p * (a == 3) - (a++); }\n")
    tu = clang.parse(src, ["-std=c++17"])
    nodes = [c for c in clang.walk(tu.cursor) if c.location.file is not None and c.location.file.name == str(src)
             and c.kind.name in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR", "UNARY_OPERATOR")]
    ci = clang.cindex()

    def no_tokens(self):
        raise AssertionError("tokenized")
    monkeypatch.setattr(ci.Cursor, "get_tokens", no_tokens)
    got = [operator_of(c, list(c.get_children())) for c in nodes]
    assert got == ["+=", "=", "<<", "-", "+", "-", "*", "*", "==", "++"]


def test_a_kernel_with_an_expression_of_thousands_of_terms_is_extracted(tmp_path):
    terms = " + ".join(f"x[i + {j}] * {j}.0f" for j in range(1500))
    (tmp_path / "long.cu").write_text(textwrap.dedent(f"""
        __global__ void taps(const float *x, float *y, int n) {{
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) y[i] = {terms};
        }}
        int main() {{ float *x, *y; cudaMalloc(&x, 1 << 20); cudaMalloc(&y, 1 << 20); taps<<<4, 256>>>(x, y, 1024); }}
    """))
    inv = extract(tmp_path, ExtractOptions(jobs=1, use_cache=False))
    k = inv["kernels"][0]
    assert k["name"] == "taps" and len(k["launch_sites"]) == 1 and inv["skipped"] == []
