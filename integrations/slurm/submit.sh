#!/usr/bin/env bash
# Submit `mepgen optimize` over the nodes of a SLURM allocation: the chosen kernels are split over TASKS array
# tasks (each runs `mepgen optimize --only ITS_KERNELS`, one worker per GPU the task is given), then a job that
# waits for all of them merges their rows into one table (`mepgen optimize --merge NAME`).
#
#   integrations/slurm/submit.sh APP TASKS [--all | --top N | --only K1,K2] [-- optimize options...]
#
#   APP      the application's folder (on a file system every node sees)
#   TASKS    array tasks (nodes); fewer when there are fewer kernels
#   options  passed to every `mepgen optimize`, e.g. -- --budget 40 --time-limit 600
# Environment: MEPGEN (the mepgen command, default `mepgen`), MEPGEN_BATCH (the batch name, default
# batch-DATE-TIME), SBATCH_ARGS (extra sbatch arguments for every job: partition, account, --gpus-per-task...).
# The table: APP/.mepgen/batches/NAME/table.md. A task that fails leaves its kernels without rows; submitting
# again with the same MEPGEN_BATCH runs only those.
set -euo pipefail
if [ $# -lt 2 ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
APP=$(cd "$1" && pwd)
TASKS=$2
shift 2
case $TASKS in ''|*[!0-9]*|0) echo "submit.sh: TASKS must be a positive integer, not '$TASKS'" >&2; exit 2;; esac
SELECT=()
OPTS=()
while [ $# -gt 0 ]; do
    if [ "$1" = "--" ]; then shift; OPTS=("$@"); break; fi
    SELECT+=("$1")
    shift
done
[ ${#SELECT[@]} -gt 0 ] || SELECT=(--all)
MEPGEN=${MEPGEN:-mepgen}
NAME=${MEPGEN_BATCH:-batch-$(date +%Y%m%d-%H%M%S)}
HERE=$(cd "$(dirname "$0")" && pwd)
DIR="$APP/.mepgen/batches/$NAME"
mkdir -p "$DIR"
$MEPGEN optimize -C "$APP" "${SELECT[@]}" --list > "$DIR/kernels.txt"
N=$(grep -c . "$DIR/kernels.txt" || true)
if [ "$N" -eq 0 ]; then echo "submit.sh: no kernel to optimize" >&2; exit 3; fi
[ "$TASKS" -le "$N" ] || TASKS=$N
# shellcheck disable=SC2086
JOB=$(sbatch --parsable ${SBATCH_ARGS:-} --job-name=mepgen-optimize --array=0-$((TASKS - 1)) \
      "$HERE/mepgen-array.sbatch" "$APP" "$NAME" "${OPTS[@]}")
JOB=${JOB%%;*}
# shellcheck disable=SC2086
MERGE=$(sbatch --parsable ${SBATCH_ARGS:-} --job-name=mepgen-merge --dependency=afterany:"$JOB" \
        --wrap "$MEPGEN optimize -C '$APP' --merge '$NAME'")
echo "batch $NAME: $N kernel(s) over $TASKS task(s): array job $JOB, merge job ${MERGE%%;*}; table: $DIR/table.md"
