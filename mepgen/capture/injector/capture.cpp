// mepgen capture injector: records the inputs and outputs of kernel launches inside an unmodified application.
//
// Loaded by the CUDA driver through CUDA_INJECTION64_PATH, so it sees every launch whether the application links
// the CUDA runtime statically (nvcc's default) or dynamically, or calls the driver API itself: it subscribes to
// CUPTI's driver-API callbacks for cuLaunchKernel, cuLaunchKernelEx and cuLaunchCooperativeKernel, where every
// runtime launch ends, and to the driver's allocation calls (cuMemAlloc*, cuMemFree*), so it knows every device
// allocation's range. Runtime-API launches and graph launches are only counted, to explain a kernel no driver
// launch callback saw.
//
// The Python side (mepgen/capture/plan.py) writes a plain-text plan and names it in MEPGEN_CAPTURE_PLAN: one or
// more targets (kernel to match: qualified base name, optional template arguments, or an exact mangled name; which
// matching launch to take, by index or the longest), which parameters are pointers, which may hold device pointers
// (structs passed by value, buffers of pointers or structs), which __constant__ symbols each kernel reads, the byte
// limit and the output folder.
// At a chosen launch's entry the injector synchronizes the context, reads the argument bytes (cuFuncGetParamInfo),
// and collects every allocation reachable from them: the allocation behind each pointer argument, then device
// pointers found in argument bytes and (to a bounded depth) in the contents of allocations that may hold pointers;
// each found pointer is a relocation (where it lies, which allocation and offset it points to), so a replay can
// rewrite it to its own buffers. It copies all of them and the __constant__ symbols; at the launch's exit it
// synchronizes again and copies the allocations again. With "longest" every matching launch is timed (events on
// its stream) and the longest one's record is kept. Each target's record lands in <out>/k<T>/ (raw files plus
// capture.json); status.<pid>.json says, per target, what was seen, matched, captured or refused and why.
// The driver functions are looked up with dlsym (this library is built without libcuda, which a build machine
// without a GPU driver does not have); the versioned names come from cuda.h's macros.
#include <cuda.h>
#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#define MG_STR2(x) #x
#define MG_STR(x) MG_STR2(x)  // expands cuda.h's versioning macros: cuMemGetAddressRange -> "cuMemGetAddressRange_v2"

namespace {

const char* kInjectorVersion = "3";

struct Driver {
    decltype(&cuCtxSynchronize) ctxSynchronize = nullptr;
    decltype(&cuMemGetAddressRange) memGetAddressRange = nullptr;
    decltype(&cuMemcpyDtoH) memcpyDtoH = nullptr;
    decltype(&cuPointerGetAttribute) pointerGetAttribute = nullptr;
    decltype(&cuFuncGetModule) funcGetModule = nullptr;
    decltype(&cuModuleGetGlobal) moduleGetGlobal = nullptr;
    decltype(&cuStreamIsCapturing) streamIsCapturing = nullptr;
    decltype(&cuGetErrorName) getErrorName = nullptr;
    decltype(&cuEventCreate) eventCreate = nullptr;
    decltype(&cuEventRecord) eventRecord = nullptr;
    decltype(&cuEventSynchronize) eventSynchronize = nullptr;
    decltype(&cuEventElapsedTime) eventElapsedTime = nullptr;
    decltype(&cuEventDestroy) eventDestroy = nullptr;
#if CUDA_VERSION >= 12040
    decltype(&cuFuncGetParamInfo) funcGetParamInfo = nullptr;
#endif
#if CUDA_VERSION >= 12000
    // The runtime of CUDA 12+ loads kernels lazily through cuLibrary: the handle a launch carries may be a
    // CUkernel, which the function queries refuse; cuKernelGetFunction gives the CUfunction of the context.
    decltype(&cuKernelGetFunction) kernelGetFunction = nullptr;
    decltype(&cuStreamGetId) streamGetId = nullptr;
#endif
#if CUDA_VERSION >= 12030
    decltype(&cuFuncGetName) funcGetName = nullptr;
#endif
};

struct ParamPlan {
    std::string kind;  // pointer | value
    std::string name;
    bool scan = false;  // its bytes (value) or the allocation it points to (pointer) may hold device pointers
};

struct ConstPlan {
    std::string name;                  // qualified name, for the manifest
    std::vector<std::string> symbols;  // module symbol names to try, in order
};

struct Target {  // one kernel the plan asks for
    std::string kernel, targs, mangled;
    long launch = 0;       // the index of the matching launch to record
    bool longest = false;  // or: time every matching launch and keep the longest
    std::vector<ParamPlan> params;
    std::vector<ConstPlan> consts;
};

struct Plan {
    std::string out;
    double after_ms = -1.0, start_epoch_ms = 0.0;
    unsigned long long max_bytes = 1ull << 32;
    bool exit_after = false;
    int scan_depth = 2;  // allocations found inside allocations are scanned again up to this depth
    bool gpu_times_only = false;  // record nothing: every kernel's GPU time alone (mepgen capture --gpu-times)
    std::vector<Target> targets;
};

struct Alloc {
    CUdeviceptr base = 0;
    size_t size = 0;
    std::string via;  // param NAME | reached
    int depth = 0;
    bool scan = false;
    bool managed = false;
};

struct Reloc {  // a device pointer found in the argument bytes or in an allocation's contents
    bool in_param = false;
    size_t where = 0;    // parameter index or allocation id
    size_t at = 0;       // byte offset in the parameter's bytes or the allocation
    size_t target = 0;   // allocation id it points into
    size_t offset = 0;   // byte offset into that allocation
};

struct Launch {  // what one cuLaunchKernel* call carries
    CUfunction f = nullptr;
    unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, cluster[3] = {0, 0, 0};
    unsigned smem = 0;
    CUstream stream = nullptr;
    void** params = nullptr;
    void** extra = nullptr;
    const char* api = "";
    bool cooperative = false;
    CUfunction resolved = nullptr;  // the context's CUfunction when f is a CUkernel handle
};

struct Record {  // one launch being recorded (in memory until it is kept)
    Launch launch;
    long index = 0;
    double time_ms = 0.0, kernel_ms = -1.0, capture_ms = 0.0;
    std::string name, mangled, params_json, consts_json;
    std::vector<Alloc> allocs;
    std::vector<Reloc> relocs;
    std::vector<std::vector<unsigned char>> before, after, consts;
    std::vector<std::string> const_files;
    unsigned long long bytes = 0;
    CUevent start = nullptr, stop = nullptr;
};

struct TargetState {
    long matched = 0, before_window = 0;
    bool capturing = false, done = false, captured = false, claimed = false;
    uint32_t correlation = 0;
    std::string refusal;
    Record rec;
    double best_ms = -1.0;
    long kept_index = -1, timed = 0, skipped = 0;
    uint32_t kept_correlation = 0;  // the recorded launch's, to find its GPU time among the activity records
};

struct Seen {  // a launched function: its demangled name, which target wants it, how often it ran
    std::string name;
    int target = -1;
    long launches = 0;
};

struct State {
    Plan plan;
    std::string error;  // the plan could not be read, or CUPTI failed: nothing is captured
    std::unordered_map<CUfunction, Seen> functions;   // every kernel launched, looked up once each
    std::map<std::string, long> runtime_only;          // runtime launches that reached no driver callback
    std::map<CUdeviceptr, std::pair<size_t, bool>> allocations;  // live device allocations: base -> (bytes, managed)
    long graph_launches = 0;
    std::vector<TargetState> targets;
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

std::string num(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
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

std::string target_dir(size_t t) { return g_st.plan.out + "/k" + std::to_string(t); }

// --- GPU time of every launch (CUPTI activity records) ---------------------------------------------------------------
// An event pair around one launch also holds its submission (tens of microseconds on a first launch); the activity
// record holds the kernel's own start and end on the GPU: the application's time of a kernel, like for like with the
// MEP's. Per launched function: launches, total, min and max; per correlation id of a recorded launch: its time.

std::string demangle(const char* mangled);

#ifndef MG_KERNEL_RECORD
#define MG_KERNEL_RECORD CUpti_ActivityKernel4
#endif

const size_t kMaxConfigs = 32;

struct GpuTimes {
    std::mutex mu;
    std::map<std::string, std::vector<unsigned long long>> by_name;  // mangled -> {launches, total, min, max} ns
    std::map<uint32_t, unsigned long long> by_correlation;
    // mangled -> launch configuration {grid x y z, block x y z, dynamic shared bytes} -> {launches, total} ns: the
    // configurations the application launched each function with (at most kMaxConfigs each; the rest counted)
    std::map<std::string, std::map<std::array<long long, 7>, std::array<unsigned long long, 2>>> by_config;
    std::map<std::string, unsigned long long> configs_over;
    bool enabled = false;
    unsigned long long dropped = 0;
};
GpuTimes g_gpu;

void CUPTIAPI gpu_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *size = 1 << 20;
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
    *max_records = 0;
}

void CUPTIAPI gpu_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
    (void)stream; (void)size;
    CUpti_Activity* rec = nullptr;
    {
        std::lock_guard<std::mutex> lock(g_gpu.mu);
        while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
            if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
            const MG_KERNEL_RECORD* k = reinterpret_cast<const MG_KERNEL_RECORD*>(rec);
            if (k->end <= k->start) continue;
            unsigned long long d = k->end - k->start;
            std::vector<unsigned long long>& v = g_gpu.by_name[k->name ? k->name : "?"];
            if (v.empty()) v = {0, 0, d, d};
            v[0] += 1; v[1] += d; v[2] = std::min(v[2], d); v[3] = std::max(v[3], d);
            g_gpu.by_correlation[k->correlationId] = d;
            std::array<long long, 7> cfg = {k->gridX, k->gridY, k->gridZ, k->blockX, k->blockY, k->blockZ,
                                            (long long)k->dynamicSharedMemory};
            auto& configs = g_gpu.by_config[k->name ? k->name : "?"];
            auto at = configs.find(cfg);
            if (at != configs.end()) { at->second[0] += 1; at->second[1] += d; }
            else if (configs.size() < kMaxConfigs) configs[cfg] = {1, d};
            else g_gpu.configs_over[k->name ? k->name : "?"] += 1;
        }
        size_t dropped = 0;
        if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) g_gpu.dropped += dropped;
    }
    std::free(buffer);
}

void enable_gpu_times() {
    if (cuptiActivityRegisterCallbacks(gpu_buffer_requested, gpu_buffer_completed) != CUPTI_SUCCESS) return;
    g_gpu.enabled = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
}

std::string gpu_times_json() {  // caller holds g_mu; takes g_gpu.mu
    std::lock_guard<std::mutex> lock(g_gpu.mu);
    std::string s = "{\"enabled\": " + std::string(g_gpu.enabled ? "true" : "false") + ", \"dropped\": " +
                    std::to_string(g_gpu.dropped) + ", \"kernels\": {";
    const char* sep = "";
    for (auto& kv : g_gpu.by_name) {
        s += sep + jstr(demangle(kv.first.c_str())) + ": [" + std::to_string(kv.second[0]) + ", " + std::to_string(kv.second[1]) +
             ", " + std::to_string(kv.second[2]) + ", " + std::to_string(kv.second[3]) + "]";
        sep = ", ";
    }
    s += "}, \"configs\": {";  // demangled -> [[gx, gy, gz, bx, by, bz, shared, launches, total ns], ...]
    sep = "";
    for (auto& kv : g_gpu.by_config) {
        s += sep + jstr(demangle(kv.first.c_str())) + ": [";
        const char* sep2 = "";
        for (auto& c : kv.second) {
            s += sep2 + std::string("[");
            for (long long v : c.first) s += std::to_string(v) + ", ";
            s += std::to_string(c.second[0]) + ", " + std::to_string(c.second[1]) + "]";
            sep2 = ", ";
        }
        s += "]";
        sep = ", ";
    }
    s += "}, \"configs_over\": {";
    sep = "";
    for (auto& kv : g_gpu.configs_over) {
        s += sep + jstr(demangle(kv.first.c_str())) + ": " + std::to_string(kv.second);
        sep = ", ";
    }
    return s + "}}";
}

double gpu_ms_of(uint32_t correlation) {  // caller holds g_gpu.mu
    auto it = g_gpu.by_correlation.find(correlation);
    return it == g_gpu.by_correlation.end() ? -1.0 : it->second / 1e6;
}

void write_status(const char* phase) {  // caller holds g_mu (or is single-threaded)
    if (g_st.plan.out.empty()) return;
    std::string s = "{\"injector\": " + jstr(kInjectorVersion) + ", \"pid\": " + std::to_string(getpid());
    s += ", \"phase\": " + jstr(phase) + ", \"error\": " + jstr(g_st.error);
    s += ", \"graph_launches\": " + std::to_string(g_st.graph_launches);
    s += ", \"tracked_allocations\": " + std::to_string(g_st.allocations.size()) + ", \"targets\": [";
    for (size_t t = 0; t < g_st.targets.size(); ++t) {
        const TargetState& ts = g_st.targets[t];
        s += (t ? ", " : "") + std::string("{\"target\": ") + std::to_string(t) + ", \"matched\": " + std::to_string(ts.matched) +
             ", \"before_window\": " + std::to_string(ts.before_window) + ", \"captured\": " + (ts.captured ? "true" : "false") +
             ", \"kept_launch\": " + std::to_string(ts.kept_index) + ", \"timed\": " + std::to_string(ts.timed) + ", \"skipped\": " + std::to_string(ts.skipped) +
             ", \"longest_ms\": " + num(ts.best_ms) + ", \"refusal\": " + jstr(ts.refusal);
        {
            std::lock_guard<std::mutex> lock(g_gpu.mu);
            s += ", \"gpu_ms\": " + num(ts.captured ? gpu_ms_of(ts.kept_correlation) : -1.0) + "}";
        }
    }
    s += "], \"seen\": {";
    std::map<std::string, long> seen;
    for (auto& kv : g_st.functions) seen[kv.second.name] += kv.second.launches;
    const char* sep = "";
    for (auto& kv : seen) { s += sep + jstr(kv.first) + ": " + std::to_string(kv.second); sep = ", "; }
    s += "}, \"runtime_only\": {";
    sep = "";
    for (auto& kv : g_st.runtime_only) { s += sep + jstr(kv.first) + ": " + std::to_string(kv.second); sep = ", "; }
    s += "}, \"gpu\": " + gpu_times_json() + "}\n";
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
            if (line != "mepgen-capture-plan 2") { err = "not a version-2 mepgen capture plan"; std::fclose(fh); return false; }
            continue;
        }
        if (line.empty()) continue;
        auto f = split_tabs(line);
        const std::string& k = f[0];
        auto need = [&](size_t n) { if (f.size() < n) err = "plan line " + std::to_string(lineno) + ": too few fields"; return f.size() >= n; };
        auto target = [&](const std::string& s) -> Target* {
            size_t t = std::strtoul(s.c_str(), nullptr, 10);
            if (t >= p.targets.size()) { err = "plan line " + std::to_string(lineno) + ": no target " + s; return nullptr; }
            return &p.targets[t];
        };
        if (!need(2)) break;
        if (k == "out") p.out = f[1];
        else if (k == "after_ms") p.after_ms = std::atof(f[1].c_str());
        else if (k == "start_epoch_ms") p.start_epoch_ms = std::atof(f[1].c_str());
        else if (k == "max_bytes") p.max_bytes = std::strtoull(f[1].c_str(), nullptr, 10);
        else if (k == "exit_after") p.exit_after = f[1] == "1";
        else if (k == "scan_depth") p.scan_depth = std::atoi(f[1].c_str());
        else if (k == "gpu_times_only") p.gpu_times_only = f[1] == "1";
        else if (k == "target") {  // target T kernel targs mangled launch|longest
            if (!need(6)) break;
            if (std::strtoul(f[1].c_str(), nullptr, 10) != p.targets.size()) { err = "plan line " + std::to_string(lineno) + ": targets out of order"; break; }
            Target t;
            t.kernel = f[2]; t.targs = f[3]; t.mangled = f[4];
            if (f[5] == "longest") t.longest = true;
            else t.launch = std::atol(f[5].c_str());
            p.targets.push_back(t);
        } else if (k == "param") {  // param T index kind scan name
            if (!need(6)) break;
            Target* t = target(f[1]);
            if (!t) break;
            t->params.push_back({f[3], f[5], f[4] == "1"});
        } else if (k == "constant") {  // constant T name symbols...
            if (!need(4)) break;
            Target* t = target(f[1]);
            if (!t) break;
            t->consts.push_back({f[2], std::vector<std::string>(f.begin() + 3, f.end())});
        } else { err = "plan line " + std::to_string(lineno) + ": unknown key '" + k + "'"; break; }
    }
    std::fclose(fh);
    if (err.empty() && p.out.empty()) err = "the plan names no output folder";
    if (err.empty() && p.targets.empty() && !p.gpu_times_only) err = "the plan names no kernel";
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

bool matches(const Target& t, const char* mangled, const std::string& demangled) {
    if (!t.mangled.empty()) return t.mangled == mangled;
    std::string base, targs;
    split_name(demangled, base, targs);
    return base == t.kernel && (t.targs.empty() || t.targs == targs);
}

int match_target(const char* mangled, const std::string& demangled) {
    for (size_t t = 0; t < g_st.plan.targets.size(); ++t)
        if (matches(g_st.plan.targets[t], mangled, demangled)) return static_cast<int>(t);
    return -1;
}

// --- allocations ---------------------------------------------------------------------------------------------------

// The live allocation holding `p`: from the tracked allocations, else (`ask`) from the driver. False when none.
bool find_alloc(CUdeviceptr p, bool ask, CUdeviceptr& base, size_t& size, bool& managed) {
    if (p == 0) return false;
    auto it = g_st.allocations.upper_bound(p);
    if (it != g_st.allocations.begin()) {
        --it;
        if (p < it->first + it->second.first) { base = it->first; size = it->second.first; managed = it->second.second; return true; }
    }
    if (!ask) return false;
    unsigned int memtype = 0, is_managed = 0;
    if (g_drv.pointerGetAttribute(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS) return false;
    g_drv.pointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p);
    if (memtype == CU_MEMORYTYPE_HOST && !is_managed) return false;
    if (g_drv.memGetAddressRange(&base, &size, p) != CUDA_SUCCESS || size == 0) return false;
    managed = is_managed != 0;
    g_st.allocations[base] = {size, managed};
    return true;
}

void on_alloc(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
    if (cb->callbackSite != CUPTI_API_EXIT) return;
    if (cb->functionReturnValue && *static_cast<const CUresult*>(cb->functionReturnValue) != CUDA_SUCCESS) return;
    std::lock_guard<std::mutex> lock(g_mu);
    const void* fp = cb->functionParams;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: { auto* p = static_cast<const cuMemAlloc_v2_params*>(fp); g_st.allocations[*p->dptr] = {p->bytesize, false}; break; }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: { auto* p = static_cast<const cuMemAllocPitch_v2_params*>(fp); g_st.allocations[*p->dptr] = {*p->pPitch * p->Height, false}; break; }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: { auto* p = static_cast<const cuMemAllocManaged_params*>(fp); g_st.allocations[*p->dptr] = {p->bytesize, true}; break; }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync: { auto* p = static_cast<const cuMemAllocAsync_params*>(fp); g_st.allocations[*p->dptr] = {p->bytesize, false}; break; }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: { auto* p = static_cast<const cuMemAllocAsync_ptsz_params*>(fp); g_st.allocations[*p->dptr] = {p->bytesize, false}; break; }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync: { auto* p = static_cast<const cuMemAllocFromPoolAsync_params*>(fp); g_st.allocations[*p->dptr] = {p->bytesize, false}; break; }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: { auto* p = static_cast<const cuMemAllocFromPoolAsync_ptsz_params*>(fp); g_st.allocations[*p->dptr] = {p->bytesize, false}; break; }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: g_st.allocations.erase(static_cast<const cuMemFree_v2_params*>(fp)->dptr); break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync: g_st.allocations.erase(static_cast<const cuMemFreeAsync_params*>(fp)->dptr); break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: g_st.allocations.erase(static_cast<const cuMemFreeAsync_ptsz_params*>(fp)->dptr); break;
    default: break;
    }
}

// --- the capture ---------------------------------------------------------------------------------------------------

bool refuse(TargetState& ts, const std::string& why) {
    if (ts.captured) {  // --longest with a launch already kept: this one is skipped, the kept record stands
        ++ts.skipped;
        ts.capturing = false;
        ts.rec = Record();
        return false;
    }
    ts.refusal = why;
    ts.capturing = false;
    ts.done = true;
    ts.rec = Record();
    write_status("refused");
    return false;
}

std::string alloc_file(size_t i, const char* when) { return "alloc" + std::to_string(i) + "." + when + ".bin"; }

// The id of the allocation [base, base+size) in the record, added (to be copied and maybe scanned) when new.
size_t add_alloc(Record& rec, CUdeviceptr base, size_t size, bool managed, const std::string& via, int depth, bool scan) {
    for (size_t k = 0; k < rec.allocs.size(); ++k)
        if (rec.allocs[k].base == base) {
            if (scan && !rec.allocs[k].scan) { rec.allocs[k].scan = true; rec.allocs[k].depth = std::min(rec.allocs[k].depth, depth); }
            return k;
        }
    Alloc a;
    a.base = base; a.size = size; a.via = via; a.depth = depth; a.scan = scan; a.managed = managed;
    rec.allocs.push_back(a);
    rec.bytes += size;
    return rec.allocs.size() - 1;
}

// Device pointers among the 8-byte-aligned words of `data` (relative to its own start): relocations, and the
// allocations they reach (scanned again while depth allows).
void scan_words(Record& rec, const unsigned char* data, size_t n, bool in_param, size_t where, int depth, bool ask) {
    for (size_t at = 0; at + sizeof(CUdeviceptr) <= n; at += sizeof(CUdeviceptr)) {
        CUdeviceptr v = 0;
        std::memcpy(&v, data + at, sizeof v);
        if (v < 4096) continue;
        CUdeviceptr base = 0;
        size_t size = 0;
        bool managed = false;
        // words outside the span of the device allocations seen so far are not asked about (data, not pointers)
        bool near = !g_st.allocations.empty() && v + (1ull << 40) >= g_st.allocations.begin()->first &&
                    v <= g_st.allocations.rbegin()->first + (1ull << 40);
        if (!find_alloc(v, ask || near, base, size, managed)) continue;
        size_t id = add_alloc(rec, base, size, managed, "reached", depth + 1, depth + 1 <= g_st.plan.scan_depth);
        rec.relocs.push_back({in_param, where, at, id, static_cast<size_t>(v - base)});
    }
}

bool copy_out(TargetState& ts, size_t i, std::vector<unsigned char>& host, const char* when) {
    const Alloc& a = ts.rec.allocs[i];
    host.resize(a.size);
    CUresult r = g_drv.memcpyDtoH(host.data(), a.base, a.size);
    if (r != CUDA_SUCCESS) return refuse(ts, std::string("copying allocation ") + std::to_string(i) + " " + when + " the launch failed: " + cu_err(r));
    return true;
}

bool capture_constants(TargetState& ts, const Target& tp) {
    Record& rec = ts.rec;
    rec.consts_json.clear();
    if (tp.consts.empty()) return true;
    CUmodule mod = nullptr;
    CUfunction fn = rec.launch.resolved ? rec.launch.resolved : rec.launch.f;
    CUresult r = g_drv.funcGetModule ? g_drv.funcGetModule(&mod, fn) : CUDA_ERROR_NOT_SUPPORTED;
    if (r != CUDA_SUCCESS) return refuse(ts, "cannot find the kernel's module to read its __constant__ symbols: " + cu_err(r));
    const char* sep = "";
    for (size_t i = 0; i < tp.consts.size(); ++i) {
        const ConstPlan& c = tp.consts[i];
        CUdeviceptr dptr = 0;
        size_t bytes = 0;
        std::string found, tried;
        for (const std::string& sym : c.symbols) {
            if (g_drv.moduleGetGlobal(&dptr, &bytes, mod, sym.c_str()) == CUDA_SUCCESS) { found = sym; break; }
            tried += (tried.empty() ? "" : ", ") + sym;
        }
        if (found.empty()) return refuse(ts, "the __constant__ symbol " + c.name + " is not in the kernel's module (tried " + tried + ")");
        std::vector<unsigned char> host(bytes);
        r = g_drv.memcpyDtoH(host.data(), dptr, bytes);
        if (r != CUDA_SUCCESS) return refuse(ts, "reading the __constant__ symbol " + c.name + " failed: " + cu_err(r));
        std::string file = "const" + std::to_string(i) + ".bin";
        rec.consts.push_back(std::move(host));
        rec.const_files.push_back(file);
        rec.consts_json += sep + std::string("{\"name\": ") + jstr(c.name) + ", \"symbol\": " + jstr(found) +
                           ", \"bytes\": " + std::to_string(bytes) + ", \"file\": " + jstr(file) + "}";
        sep = ", ";
    }
    return true;
}

// Reads the arguments, collects every allocation reachable from them, refuses what cannot be replayed, copies the
// "before" state into memory.
bool capture_before(TargetState& ts, const Target& tp) {
    Record& rec = ts.rec;
    Launch& L = rec.launch;
    if (L.cooperative)
        return refuse(ts, "a cooperative launch (" + std::string(L.api) + "): its grid-wide synchronization needs the "
                          "same cooperative launch, which the MEP's <<<>>> launch is not");
#if CUDA_VERSION >= 12040
    if (!g_drv.funcGetParamInfo) return refuse(ts, "the CUDA driver has no cuFuncGetParamInfo (needs a driver for CUDA 12.4 or newer)");
    std::vector<std::pair<size_t, size_t>> layout;  // offset, size
    CUfunction fn = L.f;
    size_t off0 = 0, size0 = 0;
    CUresult first = g_drv.funcGetParamInfo(fn, 0, &off0, &size0);
    if (first != CUDA_SUCCESS && g_drv.kernelGetFunction) {
        CUfunction resolved = nullptr;
        if (g_drv.kernelGetFunction(&resolved, reinterpret_cast<CUkernel>(L.f)) == CUDA_SUCCESS && resolved) {
            fn = resolved;
            L.resolved = resolved;
            first = g_drv.funcGetParamInfo(fn, 0, &off0, &size0);
        }
    }
    if (first != CUDA_SUCCESS && first != CUDA_ERROR_INVALID_VALUE)  // INVALID_VALUE: a kernel without parameters
        return refuse(ts, "cuFuncGetParamInfo failed on the launched kernel: " + cu_err(first));
    for (size_t i = 0; first == CUDA_SUCCESS; ++i) {
        size_t off = 0, size = 0;
        if (g_drv.funcGetParamInfo(fn, i, &off, &size) != CUDA_SUCCESS) break;
        layout.push_back({off, size});
    }
#else
    return refuse(ts, "the injector was built against CUDA < 12.4, which has no cuFuncGetParamInfo");
    std::vector<std::pair<size_t, size_t>> layout;
#endif
    if (layout.size() != tp.params.size())
        return refuse(ts, "the launched kernel has " + std::to_string(layout.size()) + " parameters, the inventory " +
                          std::to_string(tp.params.size()) + " (the sources changed? rerun `mepgen extract`)");
    const unsigned char* packed = nullptr;
    if (!L.params && L.extra) {
        for (void** e = L.extra; *e != CU_LAUNCH_PARAM_END; e += 2)
            if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) packed = static_cast<const unsigned char*>(e[1]);
        if (!packed) return refuse(ts, "the launch passes its arguments in an 'extra' array without CU_LAUNCH_PARAM_BUFFER_POINTER");
    }
    if (g_drv.streamIsCapturing) {
        CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
        if (g_drv.streamIsCapturing(L.stream, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE)
            return refuse(ts, "the launch is being recorded into a CUDA graph (stream capture): its data does not exist yet");
    }
    // the application's work before this launch must be done before its buffers are read
    CUresult r = g_drv.ctxSynchronize();
    if (r != CUDA_SUCCESS) return refuse(ts, "the application had a CUDA error pending before the launch: " + cu_err(r));
    std::string pj;
    std::vector<std::vector<unsigned char>> args(layout.size());
    for (size_t i = 0; i < layout.size(); ++i) {
        const ParamPlan& pp = tp.params[i];
        const unsigned char* arg = static_cast<const unsigned char*>(L.params ? L.params[i] : packed + layout[i].first);
        args[i].assign(arg, arg + layout[i].second);
        std::string j = "{\"index\": " + std::to_string(i) + ", \"name\": " + jstr(pp.name) + ", \"kind\": " + jstr(pp.kind) +
                        ", \"offset\": " + std::to_string(layout[i].first) + ", \"size\": " + std::to_string(layout[i].second) +
                        ", \"bytes_hex\": " + jstr(hex(arg, layout[i].second));
        if (pp.kind == "pointer") {
            if (layout[i].second != sizeof(CUdeviceptr))
                return refuse(ts, "parameter " + pp.name + " is a pointer in the inventory but " + std::to_string(layout[i].second) + " bytes in the kernel");
            CUdeviceptr p = 0;
            std::memcpy(&p, arg, sizeof p);
            if (p == 0) {
                j += ", \"null\": true";
            } else {
                CUdeviceptr base = 0;
                size_t size = 0;
                bool managed = false;
                if (!find_alloc(p, true, base, size, managed)) {
                    unsigned int memtype = 0;
                    CUresult r2 = g_drv.pointerGetAttribute(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
                    if (r2 != CUDA_SUCCESS) return refuse(ts, "parameter " + pp.name + " points to memory CUDA does not know (host malloc or stack?): " + cu_err(r2));
                    if (memtype == CU_MEMORYTYPE_HOST) return refuse(ts, "parameter " + pp.name + " points to host memory mapped into the device, not a device allocation");
                    return refuse(ts, "parameter " + pp.name + " points into no device allocation");
                }
                size_t id = add_alloc(rec, base, size, managed, "param " + pp.name, 0, pp.scan);
                j += ", \"address\": " + std::to_string(static_cast<unsigned long long>(p)) + ", \"alloc\": " + std::to_string(id) +
                     ", \"alloc_offset\": " + std::to_string(static_cast<unsigned long long>(p - base)) +
                     ", \"alloc_bytes\": " + std::to_string(size) + (managed ? ", \"managed\": true" : "");
            }
        }
        pj += (i ? ", " : "") + j + "}";
    }
    rec.params_json = pj;
    // device pointers inside arguments passed by value (structs of pointers and sizes)
    for (size_t i = 0; i < layout.size(); ++i)
        if (tp.params[i].kind == "value" && tp.params[i].scan) scan_words(rec, args[i].data(), args[i].size(), true, i, 0, true);
    // then inside the allocations that may hold pointers, breadth first; every allocation is copied once
    rec.before.clear();
    for (size_t k = 0; k < rec.allocs.size(); ++k) {
        if (rec.bytes > g_st.plan.max_bytes)
            return refuse(ts, "the launch reaches " + std::to_string(rec.allocs.size()) + " allocations of " + std::to_string(rec.bytes) +
                              " bytes so far, more than the limit of " + std::to_string(g_st.plan.max_bytes) + " (raise it with --max-bytes)");
        rec.before.emplace_back();
        if (!copy_out(ts, k, rec.before.back(), "before")) return false;
        Alloc a = rec.allocs[k];
        if (a.scan && a.depth <= g_st.plan.scan_depth)
            scan_words(rec, rec.before[k].data(), rec.before[k].size(), false, k, a.depth, false);
    }
    if (!capture_constants(ts, tp)) return false;
    if (g_drv.eventCreate && g_drv.eventRecord && g_drv.eventCreate(&rec.start, CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
        g_drv.eventCreate(&rec.stop, CU_EVENT_DEFAULT) == CUDA_SUCCESS)
        g_drv.eventRecord(rec.start, L.stream);
    return true;
}

// Writes one record into k<T>/ (replacing an earlier one of the same target).
bool write_record(size_t t, TargetState& ts) {
    Record& rec = ts.rec;
    const Launch& L = rec.launch;
    std::string dir = target_dir(t);
    mkdir(dir.c_str(), 0755);
    for (size_t i = 0; i < rec.allocs.size(); ++i) {
        if (!write_file(dir + "/" + alloc_file(i, "before"), rec.before[i].data(), rec.before[i].size()) ||
            !write_file(dir + "/" + alloc_file(i, "after"), rec.after[i].data(), rec.after[i].size()))
            return refuse(ts, "cannot write the record's files in " + dir);
    }
    for (size_t i = 0; i < rec.consts.size(); ++i)
        if (!write_file(dir + "/" + rec.const_files[i], rec.consts[i].data(), rec.consts[i].size()))
            return refuse(ts, "cannot write " + dir + "/" + rec.const_files[i]);
    unsigned long long stream_id = 0;
#if CUDA_VERSION >= 12000
    if (g_drv.streamGetId) g_drv.streamGetId(L.stream, &stream_id);
#endif
    auto dims = [](const unsigned* d) { return "[" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + "]"; };
    const Target& tp = g_st.plan.targets[t];
    std::string s = "{\"format\": \"mepgen.capture.raw\", \"version\": 2, \"injector\": " + jstr(kInjectorVersion);
    s += ", \"target\": " + std::to_string(t) + ", \"pid\": " + std::to_string(getpid()) + ", \"api\": " + jstr(L.api);
    s += ", \"mangled\": " + jstr(rec.mangled) + ", \"demangled\": " + jstr(rec.name);
    s += ", \"launch_index\": " + std::to_string(rec.index) + ", \"selection\": " + jstr(tp.longest ? "longest" : "index");
    s += ", \"launches_timed\": " + std::to_string(ts.timed) + ", \"time_ms\": " + num(rec.time_ms) + ", \"kernel_ms\": " + num(rec.kernel_ms);
    s += ", \"grid\": " + dims(L.grid) + ", \"block\": " + dims(L.block) + ", \"cluster\": " + dims(L.cluster);
    s += ", \"shared_mem\": " + std::to_string(L.smem);
    s += ", \"stream\": {\"handle\": " + std::to_string(reinterpret_cast<unsigned long long>(L.stream)) + ", \"id\": " + std::to_string(stream_id) + "}";
    s += ", \"params\": [" + rec.params_json + "], \"constants\": [" + rec.consts_json + "], \"allocations\": [";
    for (size_t i = 0; i < rec.allocs.size(); ++i) {
        const Alloc& a = rec.allocs[i];
        s += (i ? ", " : "") + std::string("{\"id\": ") + std::to_string(i) + ", \"base\": " + std::to_string(static_cast<unsigned long long>(a.base)) +
             ", \"bytes\": " + std::to_string(a.size) + ", \"via\": " + jstr(a.via) + ", \"depth\": " + std::to_string(a.depth) +
             ", \"scanned\": " + (a.scan && a.depth <= g_st.plan.scan_depth ? "true" : "false") + ", \"managed\": " + (a.managed ? "true" : "false") +
             ", \"before\": " + jstr(alloc_file(i, "before")) + ", \"after\": " + jstr(alloc_file(i, "after")) + "}";
    }
    s += "], \"relocations\": [";
    for (size_t i = 0; i < rec.relocs.size(); ++i) {
        const Reloc& x = rec.relocs[i];
        s += (i ? ", " : "") + std::string("{\"in\": ") + jstr(x.in_param ? "param" : "allocation") + ", \"where\": " + std::to_string(x.where) +
             ", \"at\": " + std::to_string(x.at) + ", \"target\": " + std::to_string(x.target) + ", \"offset\": " + std::to_string(x.offset) + "}";
    }
    s += "], \"capture_ms\": " + num(rec.capture_ms) + "}\n";
    if (!write_file(dir + "/capture.json", s.data(), s.size())) return refuse(ts, "cannot write " + dir + "/capture.json");
    ts.kept_index = rec.index;
    return true;
}

// Only one process records a target, even when the application starts several (MPI ranks, child processes).
bool claim(size_t t) {
    int fd = open((g_st.plan.out + "/k" + std::to_string(t) + ".claimed").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
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
        for (unsigned i = 0; i < c->numAttrs; ++i) {
            if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
                L.cluster[0] = c->attrs[i].value.clusterDim.x; L.cluster[1] = c->attrs[i].value.clusterDim.y; L.cluster[2] = c->attrs[i].value.clusterDim.z;
            }
            if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && c->attrs[i].value.cooperative) L.cooperative = true;
        }
    };
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: { auto* p = static_cast<const cuLaunchKernel_params*>(fp); classic(p, "cuLaunchKernel"); L.extra = p->extra; break; }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: { auto* p = static_cast<const cuLaunchKernel_ptsz_params*>(fp); classic(p, "cuLaunchKernel_ptsz"); L.extra = p->extra; break; }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel: classic(static_cast<const cuLaunchCooperativeKernel_params*>(fp), "cuLaunchCooperativeKernel"); L.cooperative = true; break;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: classic(static_cast<const cuLaunchCooperativeKernel_ptsz_params*>(fp), "cuLaunchCooperativeKernel_ptsz"); L.cooperative = true; break;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: ex(static_cast<const cuLaunchKernelEx_params*>(fp), "cuLaunchKernelEx"); break;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: ex(static_cast<const cuLaunchKernelEx_ptsz_params*>(fp), "cuLaunchKernelEx_ptsz"); break;
    default: break;
    }
    return L;
}

bool all_done() {
    for (const TargetState& ts : g_st.targets) if (!ts.done) return false;
    return true;
}

void on_launch_enter(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
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
        s.target = match_target(mangled, s.name);
        it = g_st.functions.emplace(L.f, std::move(s)).first;
    }
    ++it->second.launches;
    if (it->second.target < 0 || !g_st.error.empty()) return;
    size_t t = static_cast<size_t>(it->second.target);
    TargetState& ts = g_st.targets[t];
    const Target& tp = g_st.plan.targets[t];
    if (ts.done) return;
    double when = now_epoch_ms() - g_st.plan.start_epoch_ms;
    if (g_st.plan.after_ms >= 0 && when < g_st.plan.after_ms) { ++ts.before_window; return; }
    long index = ts.matched++;
    if (!tp.longest && index != tp.launch) return;
    if (ts.capturing) { ++ts.skipped; return; }  // --longest: another thread's launch of it is being recorded
    if (!ts.claimed) {
        if (!claim(t)) { ts.done = true; ts.refusal = "another process of the application recorded this kernel"; return; }
        ts.claimed = true;
    }
    auto t0 = std::chrono::steady_clock::now();
    ts.rec = Record();
    ts.rec.launch = L;
    ts.rec.index = index;
    ts.rec.time_ms = when;
    ts.rec.name = it->second.name;
    ts.rec.mangled = mangled;
    ts.correlation = cb->correlationId;
    ts.capturing = true;
    if (capture_before(ts, tp)) ts.rec.capture_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void on_launch_exit(const CUpti_CallbackData* cb) {
    std::lock_guard<std::mutex> lock(g_mu);
    for (size_t t = 0; t < g_st.targets.size(); ++t) {
        TargetState& ts = g_st.targets[t];
        if (!ts.capturing || cb->correlationId != ts.correlation) continue;
        const Target& tp = g_st.plan.targets[t];
        Record& rec = ts.rec;
        auto t0 = std::chrono::steady_clock::now();
        CUresult launched = cb->functionReturnValue ? *static_cast<const CUresult*>(cb->functionReturnValue) : CUDA_SUCCESS;
        if (launched != CUDA_SUCCESS) { refuse(ts, "the chosen launch itself failed: " + cu_err(launched)); continue; }
        if (rec.stop) g_drv.eventRecord(rec.stop, rec.launch.stream);
        CUresult r = g_drv.ctxSynchronize();
        if (r != CUDA_SUCCESS) { refuse(ts, "the kernel failed while running: " + cu_err(r)); continue; }
        float ms = -1.0f;
        if (rec.start && rec.stop && g_drv.eventElapsedTime && g_drv.eventElapsedTime(&ms, rec.start, rec.stop) == CUDA_SUCCESS) rec.kernel_ms = ms;
        if (g_drv.eventDestroy) {
            if (rec.start) g_drv.eventDestroy(rec.start);
            if (rec.stop) g_drv.eventDestroy(rec.stop);
        }
        rec.start = rec.stop = nullptr;
        ts.capturing = false;
        ++ts.timed;
        if (tp.longest && ts.captured && rec.kernel_ms <= ts.best_ms) { rec = Record(); continue; }  // not longer: drop it
        rec.after.resize(rec.allocs.size());
        bool ok = true;
        for (size_t k = 0; k < rec.allocs.size() && ok; ++k) ok = copy_out(ts, k, rec.after[k], "after");
        if (!ok) continue;
        rec.capture_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (!write_record(t, ts)) continue;
        ts.best_ms = rec.kernel_ms;
        ts.kept_correlation = ts.correlation;
        ts.captured = true;
        if (!tp.longest) ts.done = true;
        rec = Record();  // the record is on disk: free its copies
        write_status("captured");
    }
    if (g_st.plan.exit_after && all_done()) {
        write_status("exit-after");
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

bool is_launch(CUpti_CallbackId cbid) {
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel: case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
        return true;
    default:
        return false;
    }
}

void CUPTIAPI callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) { on_runtime_launch(cb); return; }
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    if (is_launch(cbid)) {
        if (cb->callbackSite == CUPTI_API_ENTER) on_launch_enter(cbid, cb);
        else on_launch_exit(cb);
    } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch || cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz) {
        if (cb->callbackSite == CUPTI_API_ENTER) { std::lock_guard<std::mutex> lock(g_mu); ++g_st.graph_launches; }
    } else {
        on_alloc(cbid, cb);
    }
}

void at_exit() {
    if (g_gpu.enabled) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // the last launches' records
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
    load(lib, g_drv.eventCreate, MG_STR(cuEventCreate), false, missing);
    load(lib, g_drv.eventRecord, MG_STR(cuEventRecord), false, missing);
    load(lib, g_drv.eventSynchronize, MG_STR(cuEventSynchronize), false, missing);
    load(lib, g_drv.eventElapsedTime, MG_STR(cuEventElapsedTime), false, missing);
    load(lib, g_drv.eventDestroy, MG_STR(cuEventDestroy), false, missing);
#if CUDA_VERSION >= 12040
    load(lib, g_drv.funcGetParamInfo, MG_STR(cuFuncGetParamInfo), false, missing);
#endif
#if CUDA_VERSION >= 12000
    load(lib, g_drv.kernelGetFunction, MG_STR(cuKernelGetFunction), false, missing);
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
    g_st.targets.assign(g_st.plan.targets.size(), TargetState());
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
    const CUpti_CallbackId tracked[] = {
        CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz};
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
    for (CUpti_CallbackId id : tracked) enable(sub, CUPTI_CB_DOMAIN_DRIVER_API, id, err);  // missing ones: asked on demand
    for (CUpti_CallbackId id : runtime) enable(sub, CUPTI_CB_DOMAIN_RUNTIME_API, id, err);  // diagnostics only
    enable_gpu_times();
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
    const Plan& p = g_st.plan;
    std::string s = "{\"error\": " + jstr(err) + ", \"out\": " + jstr(p.out) + ", \"after_ms\": " + num(p.after_ms) +
                    ", \"max_bytes\": " + std::to_string(p.max_bytes) + ", \"exit_after\": " + (p.exit_after ? "true" : "false") +
                    ", \"scan_depth\": " + std::to_string(p.scan_depth) + ", \"targets\": [";
    for (size_t t = 0; t < p.targets.size(); ++t) {
        const Target& tp = p.targets[t];
        s += (t ? ", " : "") + std::string("{\"kernel\": ") + jstr(tp.kernel) + ", \"template_args\": " + jstr(tp.targs) +
             ", \"mangled\": " + jstr(tp.mangled) + ", \"launch\": " + std::to_string(tp.launch) + ", \"longest\": " + (tp.longest ? "true" : "false") +
             ", \"params\": [";
        for (size_t i = 0; i < tp.params.size(); ++i)
            s += (i ? ", " : "") + std::string("[") + jstr(tp.params[i].kind) + ", " + jstr(tp.params[i].name) + ", " + (tp.params[i].scan ? "true" : "false") + "]";
        s += "], \"constants\": [";
        for (size_t i = 0; i < tp.consts.size(); ++i) {
            s += (i ? ", [" : "[") + jstr(tp.consts[i].name);
            for (auto& sym : tp.consts[i].symbols) s += ", " + jstr(sym);
            s += "]";
        }
        s += "]}";
    }
    s += "], \"demangled\": " + jstr(name) + ", \"base\": " + jstr(base) + ", \"args\": " + jstr(targs) +
         ", \"match\": " + std::to_string(ok ? match_target(mangled, name) : -1) + "}";
    g_st.plan = saved;
    if (n) { std::strncpy(out, s.c_str(), n - 1); out[n - 1] = '\0'; }
    return ok ? 0 : 1;
}
