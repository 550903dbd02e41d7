"""Stands in for `mepgen optimize KERNEL -C APP --json ...` in the tests of `optimize --all` (no GPU).

Appends what it saw (kernel, CUDA_VISIBLE_DEVICES, start and end times, resumed or not) to $FAKE_WORKER_LOG
and prints the JSON outcome the real command prints. Kernels whose id contains `crash` kill themselves the
first time (a marker file in the app remembers it), `broken` ones exit 3 as a broken MEP does.
"""
import json
import os
import signal
import sys
import time

args = sys.argv[1:]
assert args[0] == "optimize", args
kernel, app = args[1], args[args.index("-C") + 1]
resumed = "--resume" in args
start = time.time()
if "crash" in kernel:
    marker = os.path.join(app, f".crashed-{kernel}")
    if not os.path.exists(marker):
        open(marker, "w").close()
        print("mepgen optimize: about to die", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
if "broken" in kernel:
    print("mepgen: the MEP's own kernel.cu does not compile", file=sys.stderr)
    sys.exit(3)
print(f"mepgen optimize: {kernel}: searching", file=sys.stderr, flush=True)
time.sleep(float(os.environ.get("FAKE_WORKER_SECONDS", "0.3")))
with open(os.environ["FAKE_WORKER_LOG"], "a") as fh:
    fh.write(json.dumps({"kernel": kernel, "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"), "start": start,
                         "end": time.time(), "resumed": resumed, "args": args}) + "\n")
speedup = 1.0 + (sum(map(ord, kernel)) % 7) / 10
print(json.dumps({"kernel": kernel, "run": f"{app}/.mepgen/runs/{kernel}/x", "evaluations": 5,
                  "stop_reason": "candidate budget reached (5)", "baseline_ms": 2.0, "baseline_pct_roofline": 30.0,
                  "best": {"id": "c0003", "median_ms": 2.0 / speedup, "speedup": speedup,
                           "change": f"unroll x4 of {kernel}", "kernel": "k.cu", "pct_roofline": 30.0 * speedup}},
                 indent=1))
