// The input perturbation of the timing session (--perturb-seed): before every launch one block of
// mepgen_perturb_block consecutive elements of each perturbable input takes other values of the same buffer,
// so no two launches see the same inputs, and after timing the re-check runs at mepgen_recheck_step.
// mepgen/evaluate/perturb.py computes the same blocks for the pycuda worker (a test compares the two).
constexpr unsigned long long mepgen_perturb_block = 16;
constexpr unsigned long long mepgen_recheck_step = 0xFFFFFFFFull;

inline unsigned long long mepgen_splitmix64(unsigned long long x)
{
    unsigned long long z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Elements [*pos, *pos + *m) of buffer number `buffer` (n elements) take the original values at
// [*src, *src + *m) rotated by one (element pos + i gets src + (i + 1) % m).
inline void mepgen_perturb_block_of(unsigned long long seed, unsigned long long step, unsigned buffer,
                                    unsigned long long n, unsigned long long* pos, unsigned long long* src,
                                    unsigned long long* m)
{
    *m = n < mepgen_perturb_block ? n : mepgen_perturb_block;
    if (*m == 0) { *pos = *src = 0; return; }
    const unsigned long long span = n - *m + 1;
    const unsigned long long s = mepgen_splitmix64(seed ^ mepgen_splitmix64((step << 8) ^ buffer));
    *pos = s % span;
    *src = mepgen_splitmix64(s) % span;
}
