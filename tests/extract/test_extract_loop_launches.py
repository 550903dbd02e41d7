"""A launch inside a loop whose block or grid the loop changes from one round to the next (`varies` of the launch
site): a counter of the loop, a local set from what changes, a variable the loop writes (conservatively, even one set
from constants before each launch); not a local declared each round from what stays."""
from __future__ import annotations

import json

from mep_apps import make_app


def test_what_a_loop_changes_in_a_launch(tmp_path):
    app = make_app(tmp_path, """
        __global__ void fill(float* o) { o[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }
        int main()
        {
            float* o; cudaMalloc(&o, 1 << 22);
            int sizes[3] = {64, 128, 256};
            int blocks = 4;
            for (int it = 0; it < 3; it++) {
                int threads = 256;
                fill<<<blocks, threads>>>(o);
                int chosen = sizes[it];
                fill<<<1024 / chosen, chosen>>>(o);
                blocks += 1;
            }
            for (int threads = 64; threads <= 256; threads *= 2) fill<<<1024 / threads, threads>>>(o);
            struct { int threads; } cfg = {128};
            for (int r = 0; r < 2; r++) { dim3 b(cfg.threads); fill<<<2, b>>>(o); }
            for (int r = 0; r < 2; r++) { dim3 g(r + 1); fill<<<g, 64>>>(o); }
            for (int r = 0; r < 2; r++) { fill<<<3, cfg.threads>>>(o); cfg.threads *= 2; }
            for (int r = 0; r < 2; r++) { dim3 t; t.x = 32; fill<<<5, t>>>(o); t.x = 64; fill<<<6, t>>>(o); }
            dim3 halves(8, 64);
            while (halves.y > 0) { fill<<<halves, 7>>>(o); halves.y = halves.y / 2; }      // updated in place
            dim3 shrink(1); int left = 4096;
            do { shrink.x = (left - 1) / 512 + 1; fill<<<shrink, 9>>>(o); left = shrink.x; } while (shrink.x > 1);
            int read = 32;
            for (int r = 0; r < 2; r++) { cudaMemcpy(&read, o, 4, cudaMemcpyDeviceToHost); fill<<<8, read>>>(o); }
            fill<<<4, 256>>>(o);
            return 0;
        }
    """)
    inv = json.loads((app / ".mepgen" / "inventory.json").read_text())
    sites = {(s["grid"], s["block"]): s.get("varies") for s in inv["kernels"][0]["launch_sites"]}
    assert sites == {("blocks", "threads"): {"grid": ["blocks"]},              # `blocks += 1` each round
                     ("1024 / chosen", "chosen"): {"grid": ["chosen"], "block": ["chosen"]},
                     ("1024 / threads", "threads"): {"grid": ["threads"], "block": ["threads"]},
                     ("8", "read"): {"block": ["read"]},                     # `&read` handed to a call
                     ("2", "b"): None,                                      # a dim3 built from what stays
                     ("g", "64"): {"grid": ["g"]},                          # ... from the counter
                     ("3", "cfg.threads"): {"block": ["cfg"]},              # a member the loop writes
                     # one dim3 set anew from constants before each launch: conservatively counted as changing
                     ("5", "t"): {"block": ["t"]}, ("6", "t"): {"block": ["t"]},
                     ("halves", "7"): {"grid": ["halves"]},
                     ("shrink", "9"): {"grid": ["shrink"]},                 # from the last round's `left`
                     ("4", "256"): None}
