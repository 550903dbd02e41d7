"""A launch inside a loop whose block or grid the loop changes from one round to the next (`varies` of the launch
site): a counter of the loop, a local set from what changes, a variable declared outside that the loop writes
(conservatively, even one set from constants before each launch); not a local declared each round and set from what
stays, however often it is set again in the round."""
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
            dim3 u;
            for (int r = 0; r < 2; r++) { u.x = 32; fill<<<10, u>>>(o); }
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
                     # a dim3 of the round, set anew from constants before each launch
                     ("5", "t"): None, ("6", "t"): None,
                     # one declared outside and set from constants: conservatively counted as changing
                     ("10", "u"): {"block": ["u"]},
                     ("halves", "7"): {"grid": ["halves"]},
                     ("shrink", "9"): {"grid": ["shrink"]},                 # from the last round's `left`
                     ("4", "256"): None}


def test_a_local_of_the_round_changes_only_with_what_it_is_made_from(tmp_path):
    app = make_app(tmp_path, """
        #include <algorithm>
        __global__ void fill(float* o) { o[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }
        constexpr int half(int v) { return v / 2; }
        struct Plan { int threads = 64; void grow() { threads *= 2; } int size() const { return threads; } };
        void pick(int& t, int r) { t = 32 << r; }
        int main(int argc, char**)
        {
            float* o; cudaMalloc(&o, 1 << 22);
            int e = 1000 * argc;
            for (int it = 0; it < 3; it++) {
                dim3 nt, nb;                                   // one pair per round, reused by several launches
                nt.x = std::min(e, 256); nt.y = 1;
                nb.x = (e + nt.x - 1) / nt.x;
                fill<<<nb, nt>>>(o);
                nt.x = half(128); nt.y = 4;
                nb.x = 1; nb.y = (e + nt.y - 1) / nt.y;
                fill<<<nb, nt>>>(o);
                int b = 64;
                if (it % 2) b = 128;                             // under a condition that changes
                fill<<<11, b>>>(o);
                int c = 1;
                for (int j = 0; j < it; j++) c *= 2;              // as often as the round says
                fill<<<12, c>>>(o);
                static int s = 32;                               // kept from the last round
                fill<<<13, s>>>(o);
                s += 32;
                int w = 32;
                pick(w, it);                                     // through a non-const reference
                fill<<<14, w>>>(o);
                if (it % 2 == 0) { dim3 gg(4); fill<<<gg, 64>>>(o); }     // declared in the branch it runs in
                Plan p;
                p.grow();                                        // a method of the round's own object
                fill<<<15, p.threads>>>(o);
            }
            Plan q;
            for (int it = 0; it < 3; it++) { fill<<<16, q.size()>>>(o); q.grow(); }
            int lb = 32;
            auto bigger = [&]() { lb *= 2; };
            for (int it = 0; it < 3; it++) { fill<<<17, lb>>>(o); bigger(); }      // through a lambda's capture
            int rb = 32;
            for (int it = 0; it < 3; it++) { fill<<<18, rb>>>(o); int& alias = rb; alias += 32; }
            return 0;
        }
    """)
    inv = json.loads((app / ".mepgen" / "inventory.json").read_text())
    sites = {(s["grid"], s["block"]): s.get("varies") for s in inv["kernels"][0]["launch_sites"]}
    assert sites[("nb", "nt")] is None
    assert sites[("11", "b")] == {"block": ["b"]}
    assert sites[("gg", "64")] is None
    assert sites[("12", "c")] == {"block": ["c"]}
    assert sites[("13", "s")] == {"block": ["s"]}
    assert sites[("14", "w")] == {"block": ["w"]}
    assert sites[("15", "p.threads")] == {"block": ["p"]}   # a method may read what the round does not show
    assert sites[("16", "q.size()")] == {"block": ["q"]}
    assert sites[("17", "lb")] == {"block": ["lb"]}
    assert sites[("18", "rb")] == {"block": ["rb"]}
