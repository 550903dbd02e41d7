// HOSTILE: at load time, before main, tries everything the sandbox must stop and prints what it got | EXPECT: rules
#include <algorithm>
#include <cmath>
#include <vector>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {
void report(const char* what, bool ok) { std::printf("PROBE %s %s\n", what, ok ? "yes" : "no"); std::fflush(stdout); }

bool can_read(const char* path)
{
    if (path == nullptr) return false;
    std::FILE* f = std::fopen(path, "rb");
    if (f == nullptr) return false;
    char c;
    bool got = std::fread(&c, 1, 1, f) == 1;
    std::fclose(f);
    return got;
}

bool can_write(const char* path)
{
    if (path == nullptr) return false;
    std::FILE* f = std::fopen(path, "wb");
    if (f == nullptr) return false;
    bool put = std::fputs("planted", f) >= 0;
    return std::fclose(f) == 0 && put;
}

bool can_connect(const char* port)
{
    if (port == nullptr) return false;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return false;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<unsigned short>(std::atoi(port)));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = connect(s, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
    close(s);
    return ok;
}

struct Probe {
    Probe()
    {
        report("read-reference", can_read(std::getenv("PROBE_REFERENCE")));
        report("read-input", can_read(std::getenv("PROBE_INPUT")));
        report("write-outside", can_write(std::getenv("PROBE_OUTSIDE")));
        report("write-workspace", can_write(std::getenv("PROBE_WORKSPACE")));
        report("write-scratch", can_write("probe-scratch.txt"));
        report("connect-loopback", can_connect(std::getenv("PROBE_PORT")));
        report("symlink-to-reference", symlink(std::getenv("PROBE_REFERENCE"), "y.npy") == 0);
    }
} probe_at_load;
}  // namespace

namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
