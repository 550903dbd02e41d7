#!/bin/sh
# GPU, one call: PolyBench/GPU's 47 kernels cut into MEPs as a user would, then bench/evaluator_rate.py before and
# after on them, the MEPs spread over every GPU of the machine.
#
#   sh bench/evaluator_rate_polybench.sh CORPUS_CUDA OUT BEFORE [SECONDS] [extra evaluator_rate.py arguments]
#   e.g. sh bench/evaluator_rate_polybench.sh corpus/polybench/CUDA $OUT/rate bench_before 40 --jobs 16
#
# CORPUS_CUDA: PolyBench-ACC's CUDA/ folder (holding utilities/ and the programs); OUT: where evaluator_rate.md/json
# go; BEFORE: a tree of the mepgen to compare with (`git archive REV | tar -x -C DIR`) or `rev:REV` (git archive
# here, needs .git), or `none` (after only); SECONDS: --time-limit of each optimize (default 40: a guard, the
# default budget of 25 candidates ends a run first where the evaluator keeps pace). The programs are
# copied under $WORK (default /tmp/mepgen-rate-poly) and cut in place there once (a second call reuses them).
# Budget: at most 47 MEPs x 2 modes x SECONDS over N GPUs, plus a minute or two to cut them: on 8 GPUs at 40 s
# at most about 8 minutes; on one GPU pass --max-meps 5, or --shard I/N over several calls.
set -eu
corpus=$(cd "$1" && pwd); mkdir -p "$2"; out=$(cd "$2" && pwd); before=$3; seconds=${4:-40}
shift 3; [ $# -gt 0 ] && shift
work=${WORK:-/tmp/mepgen-rate-poly}
here=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -d "$work/CUDA" ]; then
    mkdir -p "$work"
    cp -r "$corpus" "$work/CUDA"
fi
case "$before" in
    none) modes="--modes after" ;;
    rev:*) modes="--before-rev ${before#rev:}" ;;
    *) modes="--before-tree $(cd "$before" && pwd)" ;;
esac
apps=$(for d in "$work"/CUDA/*/* "$work"/CUDA/linear-algebra/*/*; do    # the programs: folders holding a .cu
    if ls "$d"/*.cu >/dev/null 2>&1; then echo "$d"; fi; done)
cd "$here"
# shellcheck disable=SC2086
exec python3 bench/evaluator_rate.py "$out" $apps --in-place --work "$work" --time-limit "$seconds" $modes "$@"
