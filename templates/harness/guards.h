// Guard zones around every device buffer the kernel sees (mepgen/evaluate/guards.py holds the same layout for
// the pycuda worker): each buffer lies inside a larger allocation, with mep_guard_bytes before its first byte and
// from its end to the next 256-byte boundary plus mep_guard_bytes after it, all filled with one 32-bit word
// drawn at start. After each verification launch the harness reads them back: a kernel that wrote there (past
// the end, before the start, or toward a neighbouring buffer) fails with status `memory_error`, the buffer, the
// side and the offset. The guards are multiples of 256 bytes: the buffer's alignment is what it was (a
// vectorized variant loses nothing), and a `placement` keeps its offset from a 2 MiB boundary.
// --exact-alloc (compute-sanitizer's run: mepgen/evaluate/memcheck.py) allocates each buffer alone, of its own
// size, without guards or placement, and prints `MEPGEN_BUFFER name address bytes` on stderr, so that the
// sanitizer sees every access outside a buffer and mepgen names the buffer it was meant for.
constexpr size_t mep_guard_bytes = 65536;

struct MepGuard {
    const char* name;
    unsigned char* start;        // the buffer's first byte
    size_t bytes;                // its size
    size_t after;                // the guard after it: to the next 256-byte boundary, then mep_guard_bytes
};
std::vector<MepGuard> mep_guards;
std::vector<unsigned char> mep_guard_pattern;
bool mep_exact_alloc = false;

void mep_guard_fill(const MepGuard& g)
{
    MEP_CHECK(cudaMemcpy(g.start - mep_guard_bytes, mep_guard_pattern.data(), mep_guard_bytes, cudaMemcpyHostToDevice));
    MEP_CHECK(cudaMemcpy(g.start + g.bytes, mep_guard_pattern.data(), g.after, cudaMemcpyHostToDevice));
}

// Allocation with guards: returns the allocation (for cudaFree) and sets *where to the buffer.
void* mep_guarded_alloc(size_t bytes, long long offset, size_t span, void** where, const char* name)
{
    if (mep_exact_alloc) {
        MEP_CHECK(cudaMalloc(where, bytes));
        std::fprintf(stderr, "MEPGEN_BUFFER %s %p %zu\n", name, *where, bytes);
        return *where;
    }
    if (mep_guard_pattern.empty()) {
        // drawn from the clock and this process's stack address (no <random>: a kernel file's macros, a
        // `min(a, b)` say, would break it), mixed by splitmix64; odd, so never a poison byte repeated
        unsigned long long z = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count())
                               ^ (reinterpret_cast<unsigned long long>(&z) << 16);
        z += 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        const unsigned int word = static_cast<unsigned int>(z ^ (z >> 31)) | 1u;
        mep_guard_pattern.resize(mep_guard_bytes + 256);
        for (size_t i = 0; i < mep_guard_pattern.size(); ++i) mep_guard_pattern[i] = (unsigned char)(word >> (8 * (i % 4)));
    }
    const size_t after = (bytes + 255) / 256 * 256 - bytes + mep_guard_bytes;
    const bool placed = !(offset < 0 && bytes < span);
    const size_t shift = offset < 0 ? 0 : static_cast<size_t>(offset);
    void* raw = nullptr;
    MEP_CHECK(cudaMalloc(&raw, mep_guard_bytes + (placed ? span + shift : 0) + bytes + after));
    size_t p = reinterpret_cast<size_t>(raw) + mep_guard_bytes;
    if (placed) p = (p + span - 1) / span * span + shift;
    *where = reinterpret_cast<void*>(p);
    mep_guards.push_back({name, reinterpret_cast<unsigned char*>(p), bytes, after});
    mep_guard_fill(mep_guards.back());
    return raw;
}

// After a launch: the first guard a kernel wrote into ends the run (status memory_error, exit 4).
void mep_guard_check(const char* phase)
{
    if (mep_exact_alloc) return;
    std::vector<unsigned char> seen(mep_guard_bytes + 256);
    for (const MepGuard& g : mep_guards) {
        for (int side = 0; side < 2; ++side) {
            const size_t n = side == 0 ? mep_guard_bytes : g.after;
            MEP_CHECK(cudaMemcpy(seen.data(), side == 0 ? g.start - mep_guard_bytes : g.start + g.bytes, n,
                                 cudaMemcpyDeviceToHost));
            size_t changed = 0, first = 0, last = 0;
            for (size_t i = 0; i < n; ++i) {
                if (seen[i] != mep_guard_pattern[i]) {
                    if (!changed) first = i;
                    last = i;
                    ++changed;
                }
            }
            if (changed) {
                // before: how far before the start the nearest changed byte lies; after: how far past the end
                const size_t offset = side == 0 ? n - last : first;
                fail("memory_error", std::string("\"buffer\": \"") + json_escape(g.name) + "\", \"side\": \""
                                         + (side == 0 ? "before" : "after") + "\", \"offset\": " + std::to_string(offset)
                                         + ", \"bytes\": " + std::to_string(changed) + ", \"phase\": \"" + phase + "\"", 4);
            }
        }
    }
}
