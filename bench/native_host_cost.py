"""Where a native checked run's host-side seconds go on a big MEP, measured on the CPU (no GPU needed).

A native run is one harness process. Besides the CUDA context and the kernel, it pays on the host for: reading
its input set (.npy), writing outputs back (.npy), and, in mepgen, reading those outputs and comparing them with
the references (verify.compare). This script times each of these for an input set and outputs of a given size,
the way the harness did before digests (fread into a vector; every output written and compared on the host) and
after (inputs read through a mapping; an output bit for bit the reference is digested on the GPU and not written).
The GPU side (H2D copy, digest kernel, D2H) is not measured here.

    python3 bench/native_host_cost.py --mib 210 --out-mib 32 [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mepgen.evaluate import sandbox  # noqa: E402
from mepgen.evaluate.verify import compare  # noqa: E402
from mepgen.spec import Tolerance  # noqa: E402
from mepgen.templating import _SOURCE_TREE  # noqa: E402

PROGRAM = r"""
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <sys/stat.h>
#include "npy.h"
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv)
{
    const std::string mode = argv[1], in = argv[2];
    double t0 = now();
    unsigned long long sum = 0;
    if (mode == "fread") {             // the harness before: the file's bytes copied into a vector
        FILE* f = std::fopen(in.c_str(), "rb");
        std::fseek(f, 0, SEEK_END);
        size_t n = std::ftell(f);
        std::fseek(f, 0, SEEK_SET);
        std::vector<unsigned char> bytes(n);
        if (std::fread(bytes.data(), 1, n, f) != n) return 1;
        std::fclose(f);
        for (size_t i = 0; i < n; i += 4096) sum += bytes[i];
    } else if (mode == "mmap") {       // after: mep_npy::load's mapping
        mep_npy::Array a;
        std::string error;
        if (!mep_npy::load(in, &a, &error)) return 1;
        for (size_t i = 0; i < a.bytes.size(); i += 4096) sum += a.bytes.data()[i];
    } else {                           // "save": an output written back as the harness does
        std::vector<unsigned char> host(std::strtoull(argv[3], nullptr, 10));
        std::memset(host.data(), 1, host.size());
        if (!mep_npy::save(in, "<f8", host.data(), host.size() / 8, 8)) return 1;
    }
    std::printf("%.4f %llu\n", now() - t0, sum);
    return 0;
}
"""


def build(work: Path) -> Path:
    (work / "cost.cpp").write_text(PROGRAM)
    exe = work / "cost"
    subprocess.run(["c++", "-O2", "-std=c++17", "-I", str(_SOURCE_TREE / "harness"), str(work / "cost.cpp"), "-o",
                    str(exe)], check=True)
    return exe


def timed(exe: Path, *args) -> float:
    done = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, check=True)
    return float(done.stdout.split()[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=210.0, help="input set size (MiB)")
    ap.add_argument("--out-mib", type=float, default=32.0, help="outputs' size (MiB)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="native-cost-"))
    try:
        exe = build(work)
        rng = np.random.default_rng(1)
        np.save(work / "in.npy", rng.random(int(a.mib * 2**20 / 8)))
        ref = rng.random(int(a.out_mib * 2**20 / 8))
        out_bytes = ref.nbytes
        rows = {"read inputs: fread into a vector (before)": [], "read inputs: mapping (after)": [],
                "write outputs back (before; after only when not bit for bit)": [],
                "mepgen reads outputs back (before)": [], "mepgen compares on the host (before)": [],
                "rmtree of the previous run's folder (before)": []}
        for _ in range(a.repeat):
            rows["read inputs: fread into a vector (before)"].append(timed(exe, "fread", work / "in.npy"))
            rows["read inputs: mapping (after)"].append(timed(exe, "mmap", work / "in.npy"))
            (work / "out").mkdir(exist_ok=True)
            rows["write outputs back (before; after only when not bit for bit)"].append(
                timed(exe, "save", work / "out" / "y.npy", out_bytes))
            t0 = time.perf_counter()
            got = sandbox.read_output(work / "out" / "y.npy")
            rows["mepgen reads outputs back (before)"].append(time.perf_counter() - t0)
            got = ref.copy()          # what an honest run writes: the reference's values
            t0 = time.perf_counter()
            compare("y", got, ref, Tolerance(1e-5, 1e-8), 0, "run", False)
            rows["mepgen compares on the host (before)"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            shutil.rmtree(work / "out")
            rows["rmtree of the previous run's folder (before)"].append(time.perf_counter() - t0)
        summary = {k: round(float(np.median(v)), 4) for k, v in rows.items()}
        before = sum(v for k, v in summary.items() if "(after)" not in k)
        after = summary["read inputs: mapping (after)"]
        result = {"input_mib": a.mib, "output_mib": a.out_mib, "repeat": a.repeat, "median_s": summary,
                  "host_s_before": round(before, 3), "host_s_after_bit_exact": round(after, 3)}
        if a.json:
            print(json.dumps(result, indent=1))
        else:
            for k, v in summary.items():
                print(f"{v * 1000:9.1f} ms  {k}")
            print(f"host seconds per checked run: before {before:.3f} s, after (outputs bit for bit) {after:.3f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
