// mepgen capture injector: records the inputs and outputs of one kernel launch inside an unmodified application.
//
// Loaded by the CUDA driver through CUDA_INJECTION64_PATH, so it sees every launch whether the application links
// the CUDA runtime statically (nvcc's default) or dynamically, or calls the driver API itself: it subscribes to
// CUPTI's driver-API callbacks for cuLaunchKernel, cuLaunchKernelEx and cuLaunchCooperativeKernel, where every
// runtime launch ends. Runtime-API launches are only counted, to diagnose a runtime whose launches would not reach
// the driver callbacks.
//
// The Python side (mepgen/capture/plan.py) writes a plain-text plan and names it in MEPGEN_CAPTURE_PLAN:
//   kernel to match (qualified base name, optional template arguments, or an exact mangled name), which matching
//   launch to take (index, optional time window), which parameters are pointers, which __constant__ symbols the
//   kernel reads, the byte limit and the output folder.
// At the chosen launch's entry the injector synchronizes the context and copies, for each pointer argument, the
// whole allocation it points into (cuMemGetAddressRange), plus the __constant__ symbols and every argument's bytes;
// at the launch's exit it synchronizes again and copies the same allocations. Everything lands as raw files plus
// capture.json in the output folder; status.<pid>.json says what was seen, matched, captured or refused and why.
// The driver functions are looked up with dlsym (this library is built without libcuda, which a build machine
// without a GPU driver does not have); the versioned names come from cuda.h's macros.
#include <cuda.h>
#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#define MG_STR2(x) #x
#define MG_STR(x) MG_STR2(x)  // expands cuda.h's versioning macros: cuMemGetAddressRange -> "cuMemGetAddressRange_v2"

namespace {

const char* kInjectorVersion = "1";

struct Driver {
    decltype(&cuCtxSynchronize) ctxSynchronize = nullptr;
    decltype(&cuMemGetAddressRange) memGetAddressRange = nullptr;
    decltype(&cuMemcpyDtoH) memcpyDtoH = nullptr;
    decltype(&cuPointerGetAttribute) pointerGetAttribute = nullptr;
    decltype(&cuFuncGetModule) funcGetModule = nullptr;
    decltype(&cuModuleGetGlobal) moduleGetGlobal = nullptr;
    decltype(&cuStreamIsCapturing) streamIsCapturing = nullptr;
    decltype(&cuGetErrorName) getErrorName = nullptr;
#if CUDA_VERSION >= 12040
    decltype(&cuFuncGetParamInfo) funcGetParamInfo = nullptr;
#endif
#if CUDA_VERSION >= 12000
    // The runtime of CUDA 12+ loads kernels lazily through cuLibrary: the handle a launch carries may be a
    // CUkernel, which the function queries refuse; cuKernelGetFunction gives the CUfunction of the context.
    decltype(&cuKernelGetFunction) kernelGetFunction = nullptr;
#endif
#if CUDA_VERSION >= 12000
    decltype(&cuStreamGetId) streamGetId = nullptr;
#endif
#if CUDA_VERSION >= 12030
    decltype(&cuFuncGetName) funcGetName = nullptr;
#endif
};

struct ParamPlan {
    std::string kind;  // pointer | value
    std::string name;
};

struct ConstPlan {
    std::string name;                  // qualified name, for the manifest
    std::vector<std::string> symbols;  // module symbol names to try, in order
};

struct Plan {
    std::string out, kernel, targs, mangled;
    long launch = 0;
    double after_ms = -1.0, start_epoch_ms = 0.0;
    unsigned long long max_bytes = 1ull << 32;
    bool exit_after = false;
    std::vector<ParamPlan> params;
    std::vector<ConstPlan> consts;
};

struct Alloc {
    CUdeviceptr base = 0;
    size_t size = 0;
};

struct Launch {  // what one cuLaunchKernel* call carries
    CUfunction f = nullptr;
    unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, cluster[3] = {0, 0, 0};
    unsigned smem = 0;
    CUstream stream = nullptr;
    void** params = nullptr;
    void** extra = nullptr;
    const char* api = "";
    CUfunction resolved = nullptr;  // the context's CUfunction when f is a CUkernel handle
};

struct Seen {  // a launched function: its demangled name, whether the plan wants it, how often it ran
    std::string name;
    bool match = false;
    long launches = 0;
};

struct State {
    Plan plan;
    std::string error;  // the plan could not be read, or CUPTI failed: nothing is captured
    std::unordered_map<CUfunction, Seen> functions;   // every kernel launched, looked up once each
    std::map<std::string, long> runtime_only;          // runtime launches that reached no driver callback
    long matched = 0, before_window = 0;
    bool capturing = false, done = false, captured = false;
    uint32_t correlation = 0;
    std::string refusal, captured_name, captured_mangled;
    Launch launch;
    std::vector<Alloc> allocs;
    std::string params_json, consts_json;
    double capture_ms = 0.0, launch_time_ms = 0.0;
    unsigned long long bytes = 0;
};

Driver g_drv;
State g_st;
std::mutex g_mu;
thread_local int t_rt_depth = 0;
thread_local bool t_driver_seen = false;

double now_epoch_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(system_clock::now().time_since_epoch()).count();
}

std::string jstr(const std::string& s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') { o += '\\'; o += static_cast<char>(c); }
        else if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); o += b; }
        else o += static_cast<char>(c);
    }
    return o + "\"";
}

std::string hex(const void* p, size_t n) {
    static const char* d = "0123456789abcdef";
    std::string o;
    const unsigned char* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) { o += d[b[i] >> 4]; o += d[b[i] & 15]; }
    return o;
}

std::string cu_err(CUresult r) {
    const char* name = nullptr;
    if (g_drv.getErrorName && g_drv.getErrorName(r, &name) == CUDA_SUCCESS && name) return name;
    return "CUresult " + std::to_string(static_cast<int>(r));
}

bool write_file(const std::string& path, const void* data, size_t n) {
    FILE* fh = std::fopen(path.c_str(), "wb");
    if (!fh) return false;
    bool ok = n == 0 || std::fwrite(data, 1, n, fh) == n;
    return std::fclose(fh) == 0 && ok;
}

void write_status(const char* phase) {  // caller holds g_mu (or is single-threaded)
    if (g_st.plan.out.empty()) return;
    std::string s = "{\"injector\": " + jstr(kInjectorVersion) + ", \"pid\": " + std::to_string(getpid());
    s += ", \"phase\": " + jstr(phase) + ", \"error\": " + jstr(g_st.error);
    s += ", \"matched\": " + std::to_string(g_st.matched) + ", \"before_window\": " + std::to_string(g_st.before_window);
    s += ", \"captured\": " + std::string(g_st.captured ? "true" : "false");
    s += ", \"refusal\": " + jstr(g_st.refusal) + ", \"seen\": {";
    std::map<std::string, long> seen;
    for (auto& kv : g_st.functions) seen[kv.second.name] += kv.second.launches;
    const char* sep = "";
    for (auto& kv : seen) { s += sep + jstr(kv.first) + ": " + std::to_string(kv.second); sep = ", "; }
    s += "}, \"runtime_only\": {";
    sep = "";
    for (auto& kv : g_st.runtime_only) { s += sep + jstr(kv.first) + ": " + std::to_string(kv.second); sep = ", "; }
    s += "}, \"capture_ms\": " + std::to_string(g_st.capture_ms) + ", \"bytes\": " + std::to_string(g_st.bytes) + "}\n";
    write_file(g_st.plan.out + "/status." + std::to_string(getpid()) + ".json", s.data(), s.size());
}

// --- the plan ------------------------------------------------------------------------------------------------------

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> f;
    size_t a = 0;
    for (size_t b; (b = line.find('\t', a)) != std::string::npos; a = b + 1) f.push_back(line.substr(a, b - a));
    f.push_back(line.substr(a));
    return f;
}

bool read_plan(const char* path, Plan& p, std::string& err) {
    FILE* fh = std::fopen(path, "r");
    if (!fh) { err = std::string("cannot open the capture plan ") + path; return false; }
    char buf[8192];
    int lineno = 0;
    while (std::fgets(buf, sizeof buf, fh)) {
        std::string line(buf);
        while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
        ++lineno;
        if (lineno == 1) {
            if (line != "mepgen-capture-plan 1") { err = "not a version-1 mepgen capture plan"; std::fclose(fh); return false; }
            continue;
        }
        if (line.empty()) continue;
        auto f = split_tabs(line);
        const std::string& k = f[0];
        auto need = [&](size_t n) { if (f.size() < n) err = "plan line " + std::to_string(lineno) + ": too few fields"; return f.size() >= n; };
        if (!need(2)) break;
        if (k == "out") p.out = f[1];
        else if (k == "kernel") p.kernel = f[1];
        else if (k == "template_args") p.targs = f[1];
        else if (k == "mangled") p.mangled = f[1];
        else if (k == "launch") p.launch = std::atol(f[1].c_str());
        else if (k == "after_ms") p.after_ms = std::atof(f[1].c_str());
        else if (k == "start_epoch_ms") p.start_epoch_ms = std::atof(f[1].c_str());
        else if (k == "max_bytes") p.max_bytes = std::strtoull(f[1].c_str(), nullptr, 10);
        else if (k == "exit_after") p.exit_after = f[1] == "1";
        else if (k == "param") { if (!need(4)) break; p.params.push_back({f[2], f[3]}); }
        else if (k == "constant") { if (!need(3)) break; p.consts.push_back({f[1], std::vector<std::string>(f.begin() + 2, f.end())}); }
        else { err = "plan line " + std::to_string(lineno) + ": unknown key '" + k + "'"; break; }
    }
    std::fclose(fh);
    if (err.empty() && p.out.empty()) err = "the plan names no output folder";
    return err.empty();
}

// --- names ---------------------------------------------------------------------------------------------------------

std::string demangle(const char* mangled) {
    int status = 0;
    char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string s = (status == 0 && d) ? d : mangled;
    std::free(d);
    return s;
}

// "void ns::k<float, 4>(float const*, int)" -> base "ns::k", template arguments "float,4" (spaces removed)
void split_name(std::string s, std::string& base, std::string& targs) {
    targs.clear();
    if (!s.empty() && s.back() == ')') {
        int depth = 0;
        for (size_t i = s.size(); i-- > 0;) {
            if (s[i] == ')') ++depth;
            else if (s[i] == '(' && --depth == 0) { s.resize(i); break; }
        }
    }
    if (!s.empty() && s.back() == '>') {
        int depth = 0;
        for (size_t i = s.size(); i-- > 0;) {
            if (s[i] == '>') ++depth;
            else if (s[i] == '<' && --depth == 0) {
                for (char c : s.substr(i + 1, s.size() - i - 2)) if (c != ' ') targs += c;
                s.resize(i);
                break;
            }
        }
    }
    int depth = 0;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '<' || c == '(') ++depth;
        else if (c == '>' || c == ')') --depth;
        else if (c == ' ' && depth == 0) start = i + 1;
    }
    base = s.substr(start);
}

bool matches(const char* mangled, const std::string& demangled) {
    const Plan& p = g_st.plan;
    if (!p.mangled.empty()) return p.mangled == mangled;
    std::string base, targs;
    split_name(demangled, base, targs);
    return base == p.kernel && (p.targs.empty() || p.targs == targs);
}

// --- the capture ---------------------------------------------------------------------------------------------------

bool refuse(const std::string& why) {
    g_st.refusal = why;
    g_st.capturing = false;
    g_st.done = true;
    write_status("refused");
    return false;
}

std::string alloc_file(size_t i, const char* when) { return "alloc" + std::to_string(i) + "." + when + ".bin"; }

bool copy_allocs(const char* when) {
    for (size_t i = 0; i < g_st.allocs.size(); ++i) {
        const Alloc& a = g_st.allocs[i];
        std::vector<unsigned char> host(a.size);
        CUresult r = g_drv.memcpyDtoH(host.data(), a.base, a.size);
        if (r != CUDA_SUCCESS) return refuse(std::string("copying allocation ") + std::to_string(i) + " " + when + " the launch failed: " + cu_err(r));
        if (!write_file(g_st.plan.out + "/" + alloc_file(i, when), host.data(), host.size()))
            return refuse("cannot write " + g_st.plan.out + "/" + alloc_file(i, when));
    }
    return true;
}

bool capture_constants() {
    g_st.consts_json.clear();
    if (g_st.plan.consts.empty()) return true;
    CUmodule mod = nullptr;
    CUfunction fn = g_st.launch.resolved ? g_st.launch.resolved : g_st.launch.f;
    CUresult r = g_drv.funcGetModule ? g_drv.funcGetModule(&mod, fn) : CUDA_ERROR_NOT_SUPPORTED;
    if (r != CUDA_SUCCESS) return refuse("cannot find the kernel's module to read its __constant__ symbols: " + cu_err(r));
    const char* sep = "";
    for (size_t i = 0; i < g_st.plan.consts.size(); ++i) {
        const ConstPlan& c = g_st.plan.consts[i];
        CUdeviceptr dptr = 0;
        size_t bytes = 0;
        std::string found, tried;
        for (const std::string& sym : c.symbols) {
            if (g_drv.moduleGetGlobal(&dptr, &bytes, mod, sym.c_str()) == CUDA_SUCCESS) { found = sym; break; }
            tried += (tried.empty() ? "" : ", ") + sym;
        }
        if (found.empty()) return refuse("the __constant__ symbol " + c.name + " is not in the kernel's module (tried " + tried + ")");
        std::vector<unsigned char> host(bytes);
        r = g_drv.memcpyDtoH(host.data(), dptr, bytes);
        if (r != CUDA_SUCCESS) return refuse("reading the __constant__ symbol " + c.name + " failed: " + cu_err(r));
        std::string file = "const" + std::to_string(i) + ".bin";
        if (!write_file(g_st.plan.out + "/" + file, host.data(), bytes)) return refuse("cannot write " + file);
        g_st.consts_json += sep + std::string("{\"name\": ") + jstr(c.name) + ", \"symbol\": " + jstr(found) +
                            ", \"bytes\": " + std::to_string(bytes) + ", \"file\": " + jstr(file) + "}";
        sep = ", ";
    }
    return true;
}

// Reads the arguments, finds each pointer's allocation, refuses what cannot be replayed, copies the "before" state.
bool capture_before() {
    const Launch& L = g_st.launch;
#if CUDA_VERSION >= 12040
    if (!g_drv.funcGetParamInfo) return refuse("the CUDA driver has no cuFuncGetParamInfo (needs a driver for CUDA 12.4 or newer)");
    std::vector<std::pair<size_t, size_t>> layout;  // offset, size
    CUfunction fn = L.f;
    size_t off0 = 0, size0 = 0;
    CUresult first = g_drv.funcGetParamInfo(fn, 0, &off0, &size0);
    if (first != CUDA_SUCCESS && g_drv.kernelGetFunction) {
        CUfunction resolved = nullptr;
        if (g_drv.kernelGetFunction(&resolved, reinterpret_cast<CUkernel>(L.f)) == CUDA_SUCCESS && resolved) {
            fn = resolved;
            g_st.launch.resolved = resolved;
            first = g_drv.funcGetParamInfo(fn, 0, &off0, &size0);
        }
    }
    if (first != CUDA_SUCCESS && first != CUDA_ERROR_INVALID_VALUE)  // INVALID_VALUE: a kernel without parameters
        return refuse("cuFuncGetParamInfo failed on the launched kernel: " + cu_err(first));
    for (size_t i = 0; first == CUDA_SUCCESS; ++i) {
        size_t off = 0, size = 0;
        if (g_drv.funcGetParamInfo(fn, i, &off, &size) != CUDA_SUCCESS) break;
        layout.push_back({off, size});
    }
#else
    return refuse("the injector was built against CUDA < 12.4, which has no cuFuncGetParamInfo");
    std::vector<std::pair<size_t, size_t>> layout;
#endif
    if (layout.size() != g_st.plan.params.size())
        return refuse("the launched kernel has " + std::to_string(layout.size()) + " parameters, the inventory " +
                      std::to_string(g_st.plan.params.size()) + " (the sources changed? rerun `mepgen extract`)");
    const unsigned char* packed = nullptr;
    if (!L.params && L.extra) {
        for (void** e = L.extra; *e != CU_LAUNCH_PARAM_END; e += 2)
            if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) packed = static_cast<const unsigned char*>(e[1]);
        if (!packed) return refuse("the launch passes its arguments in an 'extra' array without CU_LAUNCH_PARAM_BUFFER_POINTER");
    }
    if (g_drv.streamIsCapturing) {
        CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
        if (g_drv.streamIsCapturing(L.stream, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE)
            return refuse("the launch is being recorded into a CUDA graph (stream capture): its data does not exist yet");
    }
    std::string pj;
    unsigned long long total = 0;
    for (size_t i = 0; i < layout.size(); ++i) {
        const ParamPlan& pp = g_st.plan.params[i];
        const void* arg = L.params ? L.params[i] : packed + layout[i].first;
        std::string j = "{\"index\": " + std::to_string(i) + ", \"name\": " + jstr(pp.name) + ", \"kind\": " + jstr(pp.kind) +
                        ", \"offset\": " + std::to_string(layout[i].first) + ", \"size\": " + std::to_string(layout[i].second) +
                        ", \"bytes_hex\": " + jstr(hex(arg, layout[i].second));
        if (pp.kind == "pointer") {
            if (layout[i].second != sizeof(CUdeviceptr))
                return refuse("parameter " + pp.name + " is a pointer in the inventory but " + std::to_string(layout[i].second) + " bytes in the kernel");
            CUdeviceptr p = 0;
            std::memcpy(&p, arg, sizeof p);
            if (p == 0) {
                j += ", \"null\": true";
            } else {
                unsigned int managed = 0, memtype = 0;
                CUresult r1 = g_drv.pointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p);
                CUresult r2 = g_drv.pointerGetAttribute(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
                if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS)
                    return refuse("parameter " + pp.name + " points to memory CUDA does not know (host malloc or stack?): " + cu_err(r1 != CUDA_SUCCESS ? r1 : r2));
                if (managed) return refuse("parameter " + pp.name + " points to managed (unified) memory, which a replay cannot place the same way");
                if (memtype != CU_MEMORYTYPE_DEVICE) return refuse("parameter " + pp.name + " points to host memory mapped into the device, not a device allocation");
                Alloc a;
                CUresult r = g_drv.memGetAddressRange(&a.base, &a.size, p);
                if (r != CUDA_SUCCESS) return refuse("parameter " + pp.name + " points into no device allocation: " + cu_err(r));
                size_t id = g_st.allocs.size();
                for (size_t k = 0; k < g_st.allocs.size(); ++k) if (g_st.allocs[k].base == a.base) id = k;
                if (id == g_st.allocs.size()) { g_st.allocs.push_back(a); total += a.size; }
                j += ", \"address\": " + std::to_string(static_cast<unsigned long long>(p)) + ", \"alloc\": " + std::to_string(id) +
                     ", \"alloc_offset\": " + std::to_string(static_cast<unsigned long long>(p - a.base)) +
                     ", \"alloc_bytes\": " + std::to_string(a.size);
            }
        }
        pj += (i ? ", " : "") + j + "}";
    }
    if (total > g_st.plan.max_bytes)
        return refuse("the launch's buffers take " + std::to_string(total) + " bytes, more than the limit of " +
                      std::to_string(g_st.plan.max_bytes) + " (raise it with --max-bytes)");
    g_st.params_json = pj;
    g_st.bytes = total;
    CUresult r = g_drv.ctxSynchronize();
    if (r != CUDA_SUCCESS) return refuse("the application had a CUDA error pending before the launch: " + cu_err(r));
    return capture_constants() && copy_allocs("before");
}

void write_capture() {
    const Launch& L = g_st.launch;
    unsigned long long stream_id = 0;
#if CUDA_VERSION >= 12000
    if (g_drv.streamGetId) g_drv.streamGetId(L.stream, &stream_id);
#endif
    auto dims = [](const unsigned* d) { return "[" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + "]"; };
    std::string s = "{\"format\": \"mepgen.capture.raw\", \"version\": 1, \"injector\": " + jstr(kInjectorVersion);
    s += ", \"pid\": " + std::to_string(getpid()) + ", \"api\": " + jstr(L.api);
    s += ", \"mangled\": " + jstr(g_st.captured_mangled) + ", \"demangled\": " + jstr(g_st.captured_name);
    s += ", \"launch_index\": " + std::to_string(g_st.plan.launch) + ", \"time_ms\": " + std::to_string(g_st.launch_time_ms);
    s += ", \"grid\": " + dims(L.grid) + ", \"block\": " + dims(L.block) + ", \"cluster\": " + dims(L.cluster);
    s += ", \"shared_mem\": " + std::to_string(L.smem);
    s += ", \"stream\": {\"handle\": " + std::to_string(reinterpret_cast<unsigned long long>(L.stream)) + ", \"id\": " + std::to_string(stream_id) + "}";
    s += ", \"params\": [" + g_st.params_json + "], \"constants\": [" + g_st.consts_json + "], \"allocations\": [";
    for (size_t i = 0; i < g_st.allocs.size(); ++i) {
        s += (i ? ", " : "") + std::string("{\"id\": ") + std::to_string(i) + ", \"base\": " + std::to_string(static_cast<unsigned long long>(g_st.allocs[i].base)) +
             ", \"bytes\": " + std::to_string(g_st.allocs[i].size) + ", \"before\": " + jstr(alloc_file(i, "before")) +
             ", \"after\": " + jstr(alloc_file(i, "after")) + "}";
    }
    s += "], \"capture_ms\": " + std::to_string(g_st.capture_ms) + "}\n";
    write_file(g_st.plan.out + "/capture.json", s.data(), s.size());
}

// Only one process captures, even when the application starts several (MPI ranks, child processes).
bool claim_output() {
    int fd = open((g_st.plan.out + "/claimed").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0) return false;
    std::string pid = std::to_string(getpid()) + "\n";
    ssize_t ignored = write(fd, pid.data(), pid.size());
    (void)ignored;
    close(fd);
    return true;
}

Launch read_launch(CUpti_CallbackId cbid, const void* fp) {
    Launch L;
    auto classic = [&L](auto* p, const char* api) {
        L.f = p->f; L.grid[0] = p->gridDimX; L.grid[1] = p->gridDimY; L.grid[2] = p->gridDimZ;
        L.block[0] = p->blockDimX; L.block[1] = p->blockDimY; L.block[2] = p->blockDimZ;
        L.smem = p->sharedMemBytes; L.stream = p->hStream; L.params = p->kernelParams; L.api = api;
    };
    auto ex = [&L](auto* p, const char* api) {
        const CUlaunchConfig* c = p->config;
        L.f = p->f; L.params = p->kernelParams; L.extra = p->extra; L.api = api;
        L.grid[0] = c->gridDimX; L.grid[1] = c->gridDimY; L.grid[2] = c->gridDimZ;
        L.block[0] = c->blockDimX; L.block[1] = c->blockDimY; L.block[2] = c->blockDimZ;
        L.smem = c->sharedMemBytes; L.stream = c->hStream;
        for (unsigned i = 0; i < c->numAttrs; ++i)
            if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
                L.cluster[0] = c->attrs[i].value.clusterDim.x; L.cluster[1] = c->attrs[i].value.clusterDim.y; L.cluster[2] = c->attrs[i].value.clusterDim.z;
            }
    };
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: { auto* p = static_cast<const cuLaunchKernel_params*>(fp); classic(p, "cuLaunchKernel"); L.extra = p->extra; break; }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: { auto* p = static_cast<const cuLaunchKernel_ptsz_params*>(fp); classic(p, "cuLaunchKernel_ptsz"); L.extra = p->extra; break; }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel: classic(static_cast<const cuLaunchCooperativeKernel_params*>(fp), "cuLaunchCooperativeKernel"); break;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: classic(static_cast<const cuLaunchCooperativeKernel_ptsz_params*>(fp), "cuLaunchCooperativeKernel_ptsz"); break;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: ex(static_cast<const cuLaunchKernelEx_params*>(fp), "cuLaunchKernelEx"); break;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: ex(static_cast<const cuLaunchKernelEx_ptsz_params*>(fp), "cuLaunchKernelEx_ptsz"); break;
    default: break;
    }
    return L;
}

void on_driver_launch(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
    if (cb->callbackSite == CUPTI_API_ENTER) {
        t_driver_seen = true;
        Launch L = read_launch(cbid, cb->functionParams);
        if (!L.f) return;
        std::lock_guard<std::mutex> lock(g_mu);
        const char* mangled = cb->symbolName ? cb->symbolName : "";
#if CUDA_VERSION >= 12030
        if (!*mangled && g_drv.funcGetName && g_drv.funcGetName(&mangled, L.f) != CUDA_SUCCESS) mangled = "";
        if (!mangled) mangled = "";
#endif
        auto it = g_st.functions.find(L.f);
        if (it == g_st.functions.end()) {
            Seen s;
            s.name = demangle(mangled);
            s.match = matches(mangled, s.name);
            it = g_st.functions.emplace(L.f, std::move(s)).first;
        }
        ++it->second.launches;
        if (!it->second.match || g_st.done || !g_st.error.empty()) return;
        double t = now_epoch_ms() - g_st.plan.start_epoch_ms;
        if (g_st.plan.after_ms >= 0 && t < g_st.plan.after_ms) { ++g_st.before_window; return; }
        long index = g_st.matched++;
        if (index != g_st.plan.launch) return;
        if (!claim_output()) { g_st.done = true; g_st.refusal = "another process of the application captured this launch"; return; }
        auto t0 = std::chrono::steady_clock::now();
        g_st.launch = L;
        g_st.launch_time_ms = t;
        g_st.captured_name = it->second.name;
        g_st.captured_mangled = mangled;
        g_st.correlation = cb->correlationId;
        g_st.capturing = true;
        if (capture_before()) g_st.capture_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return;
    }
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_st.capturing || cb->correlationId != g_st.correlation) return;
    auto t0 = std::chrono::steady_clock::now();
    CUresult launched = cb->functionReturnValue ? *static_cast<const CUresult*>(cb->functionReturnValue) : CUDA_SUCCESS;
    if (launched != CUDA_SUCCESS) { refuse("the chosen launch itself failed: " + cu_err(launched)); return; }
    CUresult r = g_drv.ctxSynchronize();
    if (r != CUDA_SUCCESS) { refuse("the kernel failed while running: " + cu_err(r)); return; }
    if (!copy_allocs("after")) return;
    g_st.capture_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    g_st.capturing = false;
    g_st.done = true;
    g_st.captured = true;
    write_capture();
    write_status("captured");
    if (g_st.plan.exit_after) {
        std::fflush(nullptr);
        _exit(0);
    }
}

void on_runtime_launch(const CUpti_CallbackData* cb) {
    if (cb->callbackSite == CUPTI_API_ENTER) {
        if (t_rt_depth++ == 0) t_driver_seen = false;
        return;
    }
    if (--t_rt_depth == 0 && !t_driver_seen) {
        std::lock_guard<std::mutex> lock(g_mu);
        ++g_st.runtime_only[demangle(cb->symbolName ? cb->symbolName : "?")];
    }
}

void CUPTIAPI callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) on_driver_launch(cbid, cb);
    else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) on_runtime_launch(cb);
}

void at_exit() {
    std::lock_guard<std::mutex> lock(g_mu);
    write_status("exit");
}

template <typename F>
bool load(void* lib, F& fn, const char* name, bool required, std::string& missing) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    if (!fn && required) missing += (missing.empty() ? "" : ", ") + std::string(name);
    return fn != nullptr;
}

bool load_driver(std::string& err) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { err = std::string("cannot open libcuda.so.1: ") + dlerror(); return false; }
    std::string missing;
    load(lib, g_drv.ctxSynchronize, MG_STR(cuCtxSynchronize), true, missing);
    load(lib, g_drv.memGetAddressRange, MG_STR(cuMemGetAddressRange), true, missing);
    load(lib, g_drv.memcpyDtoH, MG_STR(cuMemcpyDtoH), true, missing);
    load(lib, g_drv.pointerGetAttribute, MG_STR(cuPointerGetAttribute), true, missing);
    load(lib, g_drv.funcGetModule, MG_STR(cuFuncGetModule), false, missing);
    load(lib, g_drv.moduleGetGlobal, MG_STR(cuModuleGetGlobal), true, missing);
    load(lib, g_drv.streamIsCapturing, MG_STR(cuStreamIsCapturing), false, missing);
    load(lib, g_drv.getErrorName, MG_STR(cuGetErrorName), false, missing);
#if CUDA_VERSION >= 12040
    load(lib, g_drv.funcGetParamInfo, MG_STR(cuFuncGetParamInfo), false, missing);
#endif
#if CUDA_VERSION >= 12000
    load(lib, g_drv.kernelGetFunction, MG_STR(cuKernelGetFunction), false, missing);
#endif
#if CUDA_VERSION >= 12000
    load(lib, g_drv.streamGetId, MG_STR(cuStreamGetId), false, missing);
#endif
#if CUDA_VERSION >= 12030
    load(lib, g_drv.funcGetName, MG_STR(cuFuncGetName), false, missing);
#endif
    if (!missing.empty()) err = "the CUDA driver lacks " + missing;
    return missing.empty();
}

bool enable(CUpti_SubscriberHandle sub, CUpti_CallbackDomain d, CUpti_CallbackId id, std::string& err) {
    CUptiResult r = cuptiEnableCallback(1, sub, d, id);
    if (r == CUPTI_SUCCESS) return true;
    const char* s = nullptr;
    cuptiGetResultString(r, &s);
    err = std::string("cuptiEnableCallback: ") + (s ? s : "unknown CUPTI error");
    return false;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
    std::lock_guard<std::mutex> lock(g_mu);
    const char* plan = std::getenv("MEPGEN_CAPTURE_PLAN");
    if (!plan) return 0;
    std::string err;
    if (!read_plan(plan, g_st.plan, err)) {
        g_st.error = err;
        write_status("error");
        return 0;
    }
    std::atexit(at_exit);
    if (!load_driver(err)) { g_st.error = err; write_status("error"); return 0; }
    CUpti_SubscriberHandle sub;
    CUptiResult r = cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(callback), nullptr);
    if (r != CUPTI_SUCCESS) {
        const char* s = nullptr;
        cuptiGetResultString(r, &s);
        g_st.error = std::string("cuptiSubscribe: ") + (s ? s : "unknown CUPTI error") + " (is a profiler attached?)";
        write_status("error");
        return 0;
    }
    const CUpti_CallbackId driver[] = {
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz};
    const CUpti_CallbackId runtime[] = {
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
#if CUPTI_API_VERSION >= 130000
        CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
#endif
    };
    for (CUpti_CallbackId id : driver)
        if (!enable(sub, CUPTI_CB_DOMAIN_DRIVER_API, id, err)) { g_st.error = err; write_status("error"); return 0; }
    for (CUpti_CallbackId id : runtime) enable(sub, CUPTI_CB_DOMAIN_RUNTIME_API, id, err);  // diagnostics only
    write_status("loaded");
    return 1;
}

// For mepgen's tests (no GPU needed): read a plan and match one launched name exactly as a capture would, and
// report both as JSON in `out`. Returns 0 when the plan reads, 1 otherwise.
extern "C" __attribute__((visibility("default"))) int mepgen_capture_selftest(const char* plan_path, const char* mangled,
                                                                               char* out, size_t n) {
    std::lock_guard<std::mutex> lock(g_mu);
    Plan saved = g_st.plan;
    g_st.plan = Plan();
    std::string err;
    bool ok = read_plan(plan_path, g_st.plan, err);
    std::string name = demangle(mangled), base, targs;
    split_name(name, base, targs);
    std::string s = "{\"error\": " + jstr(err) + ", \"out\": " + jstr(g_st.plan.out) + ", \"kernel\": " + jstr(g_st.plan.kernel) +
                    ", \"template_args\": " + jstr(g_st.plan.targs) + ", \"mangled\": " + jstr(g_st.plan.mangled) +
                    ", \"launch\": " + std::to_string(g_st.plan.launch) + ", \"after_ms\": " + std::to_string(g_st.plan.after_ms) +
                    ", \"max_bytes\": " + std::to_string(g_st.plan.max_bytes) + ", \"exit_after\": " + (g_st.plan.exit_after ? "true" : "false") +
                    ", \"params\": [";
    for (size_t i = 0; i < g_st.plan.params.size(); ++i)
        s += (i ? ", " : "") + std::string("[") + jstr(g_st.plan.params[i].kind) + ", " + jstr(g_st.plan.params[i].name) + "]";
    s += "], \"constants\": [";
    for (size_t i = 0; i < g_st.plan.consts.size(); ++i) {
        s += (i ? ", [" : "[") + jstr(g_st.plan.consts[i].name);
        for (auto& sym : g_st.plan.consts[i].symbols) s += ", " + jstr(sym);
        s += "]";
    }
    s += "], \"demangled\": " + jstr(name) + ", \"base\": " + jstr(base) + ", \"args\": " + jstr(targs) +
         ", \"match\": " + (ok && matches(mangled, name) ? "true" : "false") + "}";
    g_st.plan = saved;
    if (n) { std::strncpy(out, s.c_str(), n - 1); out[n - 1] = '\0'; }
    return ok ? 0 : 1;
}
