#!/bin/sh
# GPU: issue 35's second set, the captured MEPs of the corpus: the listed applications captured as tune does
# (bench/tune_sweep.py --backends-only --keep: every complete MEP also run on both backends), then
# bench/evaluator_rate.py (after only, default flags, --time-limit SECONDS) on every MEP the capture completed.
#
#   sh bench/evaluator_rate_captured.sh RODINIA HECBENCH OUT [SECONDS] [APPS] [GPUS]
#   e.g. sh bench/evaluator_rate_captured.sh pack/rodinia pack/hecbench $OUT/cap 40 lud,nw,particles 0,1,2,3
#
# RODINIA, HECBENCH: the suites' folders as tune_sweep.py takes them; APPS: a comma list (default: tune_sweep's list
# of 15); GPUS: the GPUs to spread over (default: all). The copies stay under $WORK (default /tmp/mepgen-rate-cap).
# Writes OUT/sweep/tune_sweep.{json,md} and OUT/rate/evaluator_rate.{json,md}; the rate groups the MEPs by their
# original's time (< 2 ms, < 200 us) as the issue asks.
set -eu
rodinia=$(cd "$1" && pwd); hecbench=$(cd "$2" && pwd); mkdir -p "$3"; out=$(cd "$3" && pwd)
seconds=${4:-40}; apps=${5:-}; gpus=${6:-}
work=${WORK:-/tmp/mepgen-rate-cap}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
python3 bench/tune_sweep.py --rodinia "$rodinia" --hecbench "$hecbench" --out "$out/sweep" --backends-only --keep \
    --work "$work" --max-bytes 16G ${apps:+--apps "$apps"} ${gpus:+--gpus "$gpus"}
meps=$(python3 - "$out/sweep/tune_sweep.json" "$work" <<'PY'
import json, sys
from pathlib import Path
doc, work = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])
for row in doc["apps"]:
    for k in (row.get("report") or {}).get("kernels") or []:
        folder = work / f"{row['suite']}-{row['app']}" / ".mepgen" / "meps" / str(k["id"])
        if k.get("capture") == "captured" and k.get("mep_complete") and (folder / "mep.yaml").is_file():
            print(folder)
PY
)
[ -n "$meps" ] || { echo "evaluator_rate_captured: the capture completed no MEP" >&2; exit 1; }
# shellcheck disable=SC2086
exec python3 bench/evaluator_rate.py "$out/rate" $meps --time-limit "$seconds" --modes after ${gpus:+--gpus "$gpus"}
