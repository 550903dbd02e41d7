#!/usr/bin/env bash
# The same Nsight Compute metrics of one kernel in the application and in its MEP, side by side: for a kernel
# whose MEP time is off, it tells clocks (sm__cycles_elapsed.avg.per_second) from memory behaviour (L1 hit
# rate, L2 sectors, DRAM bytes) and from the shared-memory/L1 split the launch ran with.
#
#   bench/ncu_compare.sh APP_DIR BINARY MEP_DIR KERNEL_REGEX [APP_ARGS...]
set -euo pipefail
app=$1 binary=$2 mep=$3 kernel=$4; shift 4
M=gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,\
lts__t_sectors.sum,l1tex__t_sector_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,\
launch__shared_mem_config_size,launch__occupancy_limit_shared_mem,smsp__inst_executed.sum
NCU=(ncu --cache-control all --clock-control none --metrics "$M" -k "regex:$kernel" --launch-count 2)
show() { grep -E "^\s+[a-z_]+__|\(.*\)x\(" || true; }
echo "== $kernel in the application ($binary $*)"
(cd "$app" && "${NCU[@]}" "$binary" "$@" | show)
make -s -C "$mep" >/dev/null
echo "== $kernel in its MEP ($mep)"
(cd "$mep" && "${NCU[@]}" ./mep --data data/in --out /tmp/ncu-compare-out --time --reps 2 --warmup 1 --no-flush | show)
