"""Extraction on examples/heatcg: exact kernels, extents, parameters, launch sites, closures and ranking."""
from __future__ import annotations

import json

from mepgen.inventory import SCHEMA, VERSION, load

KERNELS = {
    "cg::axpy", "cg::dot", "cg::spmv_csr", "cg::xpay", "heat::apply_boundary", "heat::diffuse_step",
    "analysis::column_mean", "analysis::dense_matvec", "analysis::histogram",
}


def by_name(inv: dict) -> dict:
    return {k["qualified_name"]: k for k in inv["kernels"]}


def test_inventory_file_is_versioned_and_complete(heatcg_extracted):
    app, inv = heatcg_extracted
    on_disk = load(app / ".mepgen" / "inventory.json")
    assert on_disk["schema"] == SCHEMA and on_disk["version"] == VERSION
    assert {k["qualified_name"] for k in on_disk["kernels"]} == KERNELS
    assert inv["skipped"] == []  # legacy cudaThreadSynchronize() in main.cu parses through the shim
    assert sorted(t["file"] for t in inv["translation_units"]) == [
        "src/analysis.cu", "src/cg.cu", "src/main.cu", "src/stencil.cu"]
    # every file used has a content hash, and each kernel lists the files it needs
    assert set(inv["files"]) >= {"include/config.h", "include/device_math.cuh", "include/types.h", "src/cg.cu"}
    assert all(len(h) == 64 for h in inv["files"].values())
    k = by_name(inv)["heat::diffuse_step"]
    assert [f["path"] for f in k["files"]] == ["src/stencil.cu", "include/device_math.cuh", "include/types.h"]


def test_exact_extents_slice_the_kernel_source(heatcg_extracted):
    app, inv = heatcg_extracted
    expected_lines = {
        "cg::spmv_csr": (24, 34), "cg::axpy": (37, 44), "cg::xpay": (47, 53), "cg::dot": (58, 82),
        "heat::diffuse_step": (25, 45), "heat::apply_boundary": (52, 86),
        "analysis::histogram": (18, 24), "analysis::dense_matvec": (27, 34), "analysis::column_mean": (38, 59),
    }
    for name, k in by_name(inv).items():
        assert (k["start_line"], k["end_line"]) == expected_lines[name], name
        text = (app / k["file"]).read_bytes()[k["start_byte"]:k["end_byte"]].decode()
        assert text.startswith("template <typename T>" if name == "cg::axpy" else "__global__ void"), name
        assert text.rstrip().endswith("}"), name
        assert f" {k['name']}(" in text


def test_parameters(heatcg_extracted):
    _, inv = heatcg_extracted
    ks = by_name(inv)
    spmv = [(p["name"], p["type"], p["is_pointer"], p["is_const"], p["pointee_type"]) for p in ks["cg::spmv_csr"]["params"]]
    assert spmv == [
        ("nrows", "int", False, False, None), ("row_ptr", "const int *", True, True, "int"),
        ("col_idx", "const int *", True, True, "int"), ("vals", "const float *", True, True, "float"),
        ("x", "const float *", True, True, "float"), ("y", "float *", True, False, "float"),
    ]
    diffuse = {p["name"]: p for p in ks["heat::diffuse_step"]["params"]}
    assert diffuse["u"]["is_restrict"] and diffuse["u"]["is_const"] and diffuse["u_new"]["is_restrict"]
    assert not diffuse["u_new"]["is_const"]
    assert diffuse["g"]["struct"] == "heat::Grid" and not diffuse["g"]["is_pointer"]
    assert {p["name"]: p.get("enum") for p in ks["heat::apply_boundary"]["params"]}["kind"] == "heat::BoundaryKind"
    axpy = ks["cg::axpy"]
    assert axpy["is_template"] and axpy["template_params"] == [{"kind": "type", "name": "T"}]
    assert [p["type"] for p in axpy["params"]] == ["int", "T", "const T *", "T *"]
    assert axpy["instantiations"] == [["float"], ["double"]]
    assert ks["analysis::histogram"]["params"][2]["pointee_type"] == "unsigned int"


def test_attributes_shared_memory_and_features(heatcg_extracted):
    _, inv = heatcg_extracted
    ks = by_name(inv)
    assert ks["analysis::column_mean"]["attributes"] == {"launch_bounds": ["BLOCK_SIZE"]}
    assert ks["analysis::column_mean"]["shared_memory"]["static"][0]["size_bytes"] == 256 * 4
    assert ks["analysis::column_mean"]["shared_memory"]["static"][0]["written"] == "__shared__ float scratch[BLOCK_SIZE]"
    dyn = ks["cg::dot"]["shared_memory"]["dynamic"]
    assert [(d["name"], d["type"]) for d in dyn] == [("sdata", "float[]")]
    assert set(ks["cg::dot"]["features"]) == {"atomics", "block_sync", "shared_memory"}
    assert ks["analysis::histogram"]["features"] == ["atomics"]
    assert ks["cg::spmv_csr"]["loop_depth"] == 1 and ks["heat::diffuse_step"]["loop_depth"] == 0


def test_launch_sites_as_written(heatcg_extracted):
    _, inv = heatcg_extracted
    ks = by_name(inv)
    dots = ks["cg::dot"]["launch_sites"]
    assert [(s["line"], s["in_loop"]) for s in dots] == [(204, False), (212, False), (231, True), (250, True)]
    assert not any("varies" in s for s in dots)      # in a loop, but the loop changes neither grid nor block
    assert all((s["grid"], s["block"], s["shared_mem"], s["stream"]) ==
               ("blocks", "BLOCK_SIZE", "BLOCK_SIZE * sizeof(float)", "stream") for s in dots)
    assert dots[2]["args"] == ["n", "p", "Ap", "d_dot"] and dots[2]["enclosing_function"] == "cg::cg_solve"
    diffuse = ks["heat::diffuse_step"]["launch_sites"][0]
    assert (diffuse["file"], diffuse["line"], diffuse["kind"]) == ("src/stencil.cu", 113, "triple_chevron")
    assert diffuse["args"] == ["u", "u_new", "g", "alpha", "dt"]
    assert diffuse["locals"]["grid"] == "dim3((NX + TILE_X - 1) / TILE_X, (NY + TILE_Y - 1) / TILE_Y)"
    assert diffuse["locals"]["block"] == "dim3(TILE_X, TILE_Y)"
    # cudaLaunchKernel inside CUDA_CHECK(...): expressions come out as written, and the
    # do { } while (0) of the macro is not a loop
    bnd = ks["heat::apply_boundary"]["launch_sites"][0]
    assert bnd["kind"] == "cudaLaunchKernel" and bnd["function_expr"] == "(const void*)apply_boundary"
    assert bnd["grid"] == "dim3((perimeter + BLOCK_SIZE - 1) / BLOCK_SIZE)" and bnd["block"] == "dim3(BLOCK_SIZE)"
    assert (bnd["shared_mem"], bnd["stream"], bnd["in_loop"]) == ("0", "s", False)
    axpy = ks["cg::axpy"]["launch_sites"]
    assert [s["template_args"] for s in axpy] == [["float"], ["float"], ["float"], ["double"]]
    assert axpy[3]["enclosing_function"] == "cg::cg_solve_refined" and axpy[3]["in_loop"]


def test_dependency_closure(heatcg_extracted):
    _, inv = heatcg_extracted
    ks = by_name(inv)
    c = ks["heat::diffuse_step"]["closure"]
    assert [m["qualified_name"] for m in c["device_functions"]] == ["heat::lap5"]
    assert [m["qualified_name"] for m in c["types"]] == ["heat::Grid"]
    assert [(g["qualified_name"], g["space"]) for g in c["globals"]] == [("heat::c_stencil", "constant")]
    assert c["headers"] == ["include/device_math.cuh", "include/types.h"]
    h = ks["analysis::histogram"]["closure"]
    # transitive: histogram -> bin_index -> clamp_val<int>
    assert [m["qualified_name"] for m in h["device_functions"]] == ["clamp_val", "analysis::bin_index"]
    assert [m["name"] for m in h["macros"]] == ["NBINS"]
    assert h["macros"][0]["definition"] == "NBINS 64"
    assert [(g["qualified_name"], g["space"]) for g in h["globals"]] == [("analysis::c_hist_range", "constant")]
    b = ks["heat::apply_boundary"]["closure"]
    assert [m["qualified_name"] for m in b["enums"]] == ["heat::BoundaryKind"]
    assert ("heat::c_grid", "constant") in [(g["qualified_name"], g["space"]) for g in b["globals"]]
    assert [m["name"] for m in ks["analysis::column_mean"]["closure"]["macros"]] == ["BLOCK_SIZE"]
    # members carry their namespaces and exact extents, so a later stage can copy them
    lap5 = c["device_functions"][0]
    assert lap5["namespaces"] == ["heat"] and lap5["file"] == "include/device_math.cuh"
    spellings = [i["spelling"] for i in ks["analysis::histogram"]["closure"]["includes"]]
    assert spellings == ["algorithm", "config.h", "device_math.cuh", "analysis.h"]


def test_static_ranking_prefers_kernels_in_time_loops(heatcg_extracted):
    _, inv = heatcg_extracted
    ranked = [k["qualified_name"] for k in sorted(inv["kernels"], key=lambda k: k["rank"])]
    assert ranked[:4] == ["cg::axpy", "cg::dot", "cg::spmv_csr", "cg::xpay"]
    assert set(ranked[-3:]) == {"analysis::column_mean", "analysis::dense_matvec", "analysis::histogram"}
    assert inv["ranking_basis"].startswith("static estimate")
    xpay = by_name(inv)["cg::xpay"]
    # xpay sits in the CG loop, inside cg_solve_refined's loop, inside main's time loop
    assert xpay["rank_detail"]["sites"][0]["effective_loop_depth"] == 3
    assert abs(sum(k["share"] for k in inv["kernels"]) - 1.0) < 1e-3


def test_host_calls_and_values_for_tracing(heatcg_extracted):
    _, inv = heatcg_extracted
    calls = {(c["caller"], c["callee"], c["line"]): c for c in inv["host_calls"]}
    step = calls[("main", "heat::heat_step", 254)]
    assert step["args"] == ["d_u", "d_u_new", "grid", "kAlpha", "kDt", "stream"] and step["loop_depth"] == 1
    assert step["locals"]["grid"] == "heat::Grid{NX, NY, 1.0f, 1.0f}"
    assert inv["macros"]["NX"] == "2048" and inv["macros"]["MAT_N"] == "4096"
    assert inv["host_constants"]["(anonymous)::kDt"]["init"] == "0.2f"


def test_inventory_is_plain_json(heatcg_extracted):
    app, _ = heatcg_extracted
    json.loads((app / ".mepgen" / "inventory.json").read_text())
