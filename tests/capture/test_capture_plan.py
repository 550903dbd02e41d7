"""Capture plans from the real example inventory, kernel names, and the refusals decided before any run."""
from __future__ import annotations

import copy

import pytest

from mepgen.capture.command import parse_bytes
from mepgen.capture.convert import constant_layout, dtype_for, template_bindings
from mepgen.demangled import spelled_template_args
from mepgen.capture.names import (choose_kernel, mangled_prefix, split_demangled, split_template_args,
                                  variable_symbols)
from mepgen.capture.plan import PLAN_HEADER, make_plan, typedef_map
from mepgen.errors import MepgenError


def test_plan_for_csr_spmv_from_the_inventory(heatcg_extracted, tmp_path):
    app, inv = heatcg_extracted
    plan = make_plan(choose_kernel(inv, "cg::spmv_csr"), tmp_path, app_root=app)
    assert [(p.name, p.kind) for p in plan.params] == [
        ("nrows", "value"), ("row_ptr", "pointer"), ("col_idx", "pointer"), ("vals", "pointer"),
        ("x", "pointer"), ("y", "pointer")]
    assert [p.pointee for p in plan.params[1:]] == ["int", "int", "float", "float", "float"]
    assert plan.constants == []
    text = plan.render().splitlines()
    assert text[0] == PLAN_HEADER
    assert f"out\t{tmp_path.resolve()}" in text and "target\t0\tcg::spmv_csr\t\t\t0" in text
    # numeric elements are never scanned for device pointers
    assert "param\t0\t1\tpointer\t0\trow_ptr" in text and "param\t0\t0\tvalue\t0\tnrows" in text
    assert "after_ms\t-1" in text and "max_bytes\t4294967296" in text and "scan_depth\t2" in text


def test_plan_records_constants_with_their_module_symbols(heatcg_extracted, tmp_path):
    app, inv = heatcg_extracted
    plan = make_plan(choose_kernel(inv, "heat::diffuse_step"), tmp_path, app_root=app, launch=2, after_ms=100)
    (c,) = plan.constants
    assert c.name == "heat::c_stencil" and c.space == "constant"
    assert c.symbols == ["_ZN4heat9c_stencilE", "c_stencil", "heat::c_stencil"]
    assert constant_layout(c.declaration) == ("float", 5)
    assert plan.params[2].struct == "heat::Grid" and plan.params[2].kind == "value"
    text = plan.render()
    assert "constant\t0\theat::c_stencil\t_ZN4heat9c_stencilE\tc_stencil\theat::c_stencil\n" in text
    assert "target\t0\theat::diffuse_step\t\t\t2\n" in text and "after_ms\t100\n" in text
    # a struct passed by value is scanned for device pointers
    assert "param\t0\t2\tvalue\t1\tg\n" in text


def test_choose_kernel_spellings(heatcg_extracted):
    _, inv = heatcg_extracted
    assert choose_kernel(inv, "spmv_csr").kernel["qualified_name"] == "cg::spmv_csr"
    assert choose_kernel(inv, "cg.spmv_csr").kernel["qualified_name"] == "cg::spmv_csr"
    c = choose_kernel(inv, "cg::axpy<float>")
    assert (c.kernel["qualified_name"], c.template_args, c.display) == ("cg::axpy", "float", "cg::axpy<float>")
    m = choose_kernel(inv, "_ZN2cg4axpyIdEEviT_PKS1_PS1_")
    assert m.kernel["qualified_name"] == "cg::axpy" and m.mangled.startswith("_ZN2cg4axpyId")
    assert choose_kernel(inv, "_ZN2cg8spmv_csrEiPKiS1_PKfS3_Pf").kernel["qualified_name"] == "cg::spmv_csr"
    with pytest.raises(MepgenError, match="not a template"):
        choose_kernel(inv, "cg::spmv_csr<float>")
    with pytest.raises(MepgenError, match="matches no kernel"):
        choose_kernel(inv, "_ZN5other1kEv")
    with pytest.raises(MepgenError, match="no kernel named 'spmv_cs'.*closest: cg::spmv_csr"):
        choose_kernel(inv, "spmv_cs")


def test_demangled_names_split_like_the_injector():
    assert split_demangled("void cg::axpy<float>(int, float, float const*, float*)") == ("cg::axpy", "float")
    assert split_demangled("cg::spmv_csr(int, int const*)") == ("cg::spmv_csr", "")
    assert split_demangled("void ns::k<std::pair<int, int>, 4>(float*)") == ("ns::k", "std::pair<int,int>,4")
    assert split_demangled("(anonymous namespace)::k(int)") == ("(anonymous namespace)::k", "")
    assert split_demangled("plain_c_kernel") == ("plain_c_kernel", "")
    assert split_template_args("std::pair<int,int>,4,float") == ["std::pair<int,int>", "4", "float"]
    assert split_demangled("void m<unsigned int, false>(unsigned int)") == ("m", "unsignedint,false")
    assert spelled_template_args("void m<unsigned int, false>(unsigned int)") == ["unsigned int", "false"]
    assert spelled_template_args("void r<unsigned char, 8ul>(unsigned char*)") == ["unsigned char", "8ul"]
    assert spelled_template_args("void k<std::pair<int, long long>, 4>(float*)") == ["std::pair<int,long long>", "4"]
    assert spelled_template_args("plain_c_kernel") == []
    assert mangled_prefix("cg::spmv_csr") == "_ZN2cg8spmv_csrE" and mangled_prefix("k") == "_Z1k"
    assert variable_symbols("g") == ["g"]
    assert variable_symbols("a::b::c") == ["_ZN1a1b1cE", "c", "a::b::c"]


def test_element_types_through_templates_and_typedefs(heatcg_extracted):
    _, inv = heatcg_extracted
    axpy = choose_kernel(inv, "cg::axpy").kernel
    b = template_bindings(axpy, "void cg::axpy<double>(int, double, double const*, double*)")
    assert b == {"T": "double"}
    assert dtype_for("const T *", b) == "float64" and dtype_for("T", b) == "float64"
    # a type of two words stays two words (the MEP writes it as C++: `unsignedint` did not compile)
    b = template_bindings(axpy, "void cg::axpy<unsigned int>(int, unsigned int, unsigned int const*, unsigned int*)")
    assert b == {"T": "unsigned int"} and dtype_for("T", b) == "uint32"
    assert dtype_for("const float *__restrict", {}) == "float32"
    assert dtype_for("real_t", {}, {"real_t": "float"}) == "float32"
    assert dtype_for("heat::Grid", {}) is None
    assert constant_layout("__constant__ heat::Grid c_grid") == ("heat::Grid", 1)
    assert constant_layout("__device__ int table[4][8]") == ("int", 32)
    assert constant_layout("__constant__ float w[N]") == ("float", None)


def test_typedef_map_reads_the_declarations(tmp_path):
    (tmp_path / "t.h").write_text("typedef float real_t;\nusing idx_t = long long;\n")
    text = (tmp_path / "t.h").read_text()
    k = {"closure": {"typedefs": [
        {"name": "real_t", "qualified_name": "real_t", "file": "t.h", "start_byte": 0, "end_byte": text.index(";")},
        {"name": "idx_t", "qualified_name": "ns::idx_t", "file": "t.h", "start_byte": text.index("using"),
         "end_byte": text.rindex(";")}]}}
    assert typedef_map(tmp_path, k) == {"real_t": "float", "idx_t": "long long", "ns::idx_t": "long long"}


def _kernel(inv, name):
    return copy.deepcopy(choose_kernel(inv, name).kernel)


def test_refusals_before_running(heatcg_extracted, tmp_path):
    from mepgen.capture.names import KernelChoice
    _, inv = heatcg_extracted
    k = _kernel(inv, "cg::spmv_csr")
    k["params"][3]["type"] = "cudaTextureObject_t"
    k["params"][3]["is_pointer"] = False
    with pytest.raises(MepgenError, match="parameter 'vals' is a texture or surface object"):
        make_plan(KernelChoice(k), tmp_path)
    k = _kernel(inv, "cg::spmv_csr")
    k["features"] = ["texture"]
    with pytest.raises(MepgenError, match="texture references"):
        make_plan(KernelChoice(k), tmp_path)
    k = _kernel(inv, "heat::diffuse_step")
    k["closure"]["globals"][0]["space"] = "managed"
    with pytest.raises(MepgenError, match="__managed__ variable heat::c_stencil"):
        make_plan(KernelChoice(k), tmp_path)
    ok = KernelChoice(_kernel(inv, "cg::spmv_csr"))
    with pytest.raises(MepgenError, match="--launch must be 0 or more"):
        make_plan(ok, tmp_path, launch=-1)
    with pytest.raises(MepgenError, match="--after-ms"):
        make_plan(ok, tmp_path, after_ms=-5)
    with pytest.raises(MepgenError, match="--max-bytes must be positive"):
        make_plan(ok, tmp_path, max_bytes=0)


def test_plan_refuses_tabs_in_fields(heatcg_extracted, tmp_path):
    _, inv = heatcg_extracted
    plan = make_plan(choose_kernel(inv, "cg::spmv_csr"), tmp_path)
    plan.out_dir = tmp_path / "a\tb"
    with pytest.raises(MepgenError, match="tab or newline"):
        plan.render()


def test_parse_bytes():
    assert parse_bytes("4294967296") == 1 << 32
    assert parse_bytes("512M") == 512 << 20 and parse_bytes("8G") == 8 << 30 and parse_bytes("2GiB") == 2 << 30
    assert parse_bytes("1.5k") == 1536
    with pytest.raises(MepgenError, match="not a size"):
        parse_bytes("lots")


def test_several_kernels_in_one_plan_and_which_parameters_are_scanned(heatcg_extracted, tmp_path):
    from mepgen.capture.plan import RunPlan, may_hold_pointers
    app, inv = heatcg_extracted
    a = make_plan(choose_kernel(inv, "cg::spmv_csr"), tmp_path, app_root=app, launch=1)
    b = make_plan(choose_kernel(inv, "cg::axpy<float>"), tmp_path, app_root=app, longest=True)
    text = RunPlan(tmp_path, [a, b], max_bytes=1 << 20, exit_after=True).render()
    assert "target\t0\tcg::spmv_csr\t\t\t1\n" in text and "target\t1\tcg::axpy\tfloat\t\tlongest\n" in text
    assert "param\t1\t2\tpointer\t1\tx\n" in text   # T* of a template: T may be anything, so scanned
    assert "exit_after\t1\n" in text and "max_bytes\t1048576\n" in text
    # what may hold device pointers: structs by value, pointers to pointers or records; never numbers
    assert may_hold_pointers({"type": "Particles", "struct": "Particles"}, "value")
    assert not may_hold_pointers({"type": "float4", "struct": "float4"}, "value")
    assert not may_hold_pointers({"type": "Mode", "enum": "Mode"}, "value")
    assert not may_hold_pointers({"type": "size_t"}, "value")
    assert may_hold_pointers({"type": "float **", "pointee_type": "float *"}, "pointer")
    assert may_hold_pointers({"type": "Node *", "pointee_type": "Node"}, "pointer")
    assert not may_hold_pointers({"type": "const real_t *", "pointee_type": "real_t"}, "pointer",
                                 {"real_t": "double"})
    assert not may_hold_pointers({"type": "uint2 *", "pointee_type": "uint2"}, "pointer")
