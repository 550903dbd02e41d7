#!/usr/bin/env bash
# MEP fidelity on the dense example (issue 3): a fresh copy, extract, every MEP, then bench/mep_fidelity.py;
# appends to bench/results/mep_fidelity.md. Then bench/ncu_compare.sh on lower_solve (clocks,
# caches, shared-memory split in the application and in its MEP).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
app=/tmp/mepgen-fidelity-dense
rm -rf $app && cp -r examples/dense $app && rm -rf $app/.mepgen $app/build
make -s -C $app compile_commands.json >/dev/null
python3 -m mepgen.cli extract $app >/dev/null
(cd $app && python3 -m mepgen.cli mep --all >/dev/null)
python3 bench/mep_fidelity.py $app --binary build/dense --app-args '' --also '' --record bench/results/mep_fidelity.md
bench/ncu_compare.sh $app build/dense $app/.mepgen/meps/lower_solve lower_solve
