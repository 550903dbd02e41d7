#!/usr/bin/env bash
# MEP fidelity on the dense example (issue 3): a fresh copy, extract, every MEP, then bench/mep_fidelity.py;
# appends to bench/results/mep_fidelity.md. Then the clock check of lower_solve: the same ncu metrics
# (time, SM cycles, SM clock) of its launch in the application and in its MEP.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
app=/tmp/mepgen-fidelity-dense
rm -rf $app && cp -r examples/dense $app && rm -rf $app/.mepgen $app/build
make -s -C $app compile_commands.json >/dev/null
python3 -m mepgen.cli extract $app >/dev/null
(cd $app && python3 -m mepgen.cli mep --all >/dev/null)
python3 bench/mep_fidelity.py $app --binary build/dense --app-args '' --also '' --record bench/results/mep_fidelity.md
M=gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,lts__t_sectors.sum
NCU="ncu --cache-control all --clock-control none --metrics $M -k regex:lower_solve"
echo "== lower_solve in the application"; $NCU --launch-count 3 $app/build/dense | grep -E "lower_solve|duration|cycles|bytes|sectors"
mep=$app/.mepgen/meps/lower_solve
make -s -C $mep >/dev/null
echo "== lower_solve in its MEP"; (cd $mep && $NCU --launch-count 3 ./mep --data data/in --out /tmp/lo --time --reps 3 --warmup 1 --no-flush | grep -E "lower_solve|duration|cycles|bytes|sectors")
