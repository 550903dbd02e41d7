// npy.h -- the minimal .npy (format 1.0/2.0, C order) reader and writer the MEP harness needs.
// Inputs are made in Python (numpy) and outputs are compared there, so the harness speaks .npy.
#include <sys/mman.h>

namespace mep_npy {

// An input file's data bytes, read through a private read-only mapping of the file (no copy on the host: a
// checked run of a MEP of hundreds of MiB reads its inputs once, from the page cache, straight into cudaMemcpy).
// The mapping lives as long as the process (a harness process loads each input set at most twice).
class Bytes {
public:
    Bytes() = default;
    Bytes(const unsigned char* data, size_t size) : data_(data), size_(size) {}
    const unsigned char* data() const { return data_; }
    size_t size() const { return size_; }
private:
    const unsigned char* data_ = nullptr;
    size_t size_ = 0;
};

struct Array {
    std::string descr;
    size_t count = 0;
    Bytes bytes;
};

// Reads PATH; on failure returns false and says why in *error.
inline bool load(const std::string& path, Array* out, std::string* error)
{
    FILE* f = std::fopen(path.c_str(), "rb");      // stdio and mman only: unistd.h's names (read, close, ...)
    if (!f) { *error = "cannot open " + path; return false; }   // could clash with the kernel file's
    struct stat st;
    if (::fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) { std::fclose(f); *error = path + " is not a regular file"; return false; }
    const size_t file_size = static_cast<size_t>(st.st_size);
    if (file_size < 10) { std::fclose(f); *error = path + " is not a .npy file"; return false; }
    void* base = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fileno(f), 0);
    std::fclose(f);
    if (base == MAP_FAILED) { *error = "cannot map " + path; return false; }
    const unsigned char* bytes = static_cast<const unsigned char*>(base);
    if (std::memcmp(bytes, "\x93NUMPY", 6) != 0) { *error = path + " is not a .npy file"; return false; }
    size_t header_len = 0, at = 0;
    if (bytes[6] == 1) {
        header_len = bytes[8] | (bytes[9] << 8);
        at = 10;
    } else {
        if (file_size < 12) { *error = path + ": truncated header"; return false; }
        header_len = bytes[8] | (bytes[9] << 8) | (bytes[10] << 16) | ((size_t)bytes[11] << 24);
        at = 12;
    }
    if (file_size - at < header_len) { *error = path + ": truncated header"; return false; }
    std::string header(reinterpret_cast<const char*>(bytes + at), header_len);
    at += header_len;
    size_t d = header.find("'descr'");
    size_t q1 = header.find('\'', header.find(':', d) + 1);
    size_t q2 = header.find('\'', q1 + 1);
    if (d == std::string::npos || q1 == std::string::npos || q2 == std::string::npos) {
        *error = path + ": no descr in the header"; return false;
    }
    out->descr = header.substr(q1 + 1, q2 - q1 - 1);
    if (header.find("'fortran_order': True") != std::string::npos) {
        *error = path + ": Fortran order is not supported"; return false;
    }
    size_t s1 = header.find('(', header.find("'shape'")), s2 = header.find(')', s1);
    if (s1 == std::string::npos || s2 == std::string::npos) {
        *error = path + ": no shape in the header"; return false;
    }
    size_t count = 1;
    std::string shape = header.substr(s1 + 1, s2 - s1 - 1);
    for (size_t pos = 0; pos < shape.size();) {
        size_t next = shape.find(',', pos);
        std::string item = shape.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
        if (item.find_first_of("0123456789") != std::string::npos) count *= std::strtoull(item.c_str(), nullptr, 10);
        if (next == std::string::npos) break;
        pos = next + 1;
    }
    out->count = count;
    size_t item = std::strtoull(out->descr.c_str() + 2, nullptr, 10);
    if (item != 0 && count > (file_size - at) / item) {
        *error = path + ": fewer data bytes than the header says"; return false;
    }
    out->bytes = Bytes(bytes + at, count * item);
    return true;
}

inline bool save(const std::string& path, const std::string& descr, const void* data, size_t count, size_t item)
{
    std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + std::to_string(count) + ",), }";
    size_t total = 10 + dict.size() + 1;
    dict += std::string((64 - total % 64) % 64, ' ') + "\n";
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    unsigned char head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                              (unsigned char)(dict.size() & 0xff), (unsigned char)(dict.size() >> 8)};
    bool ok = std::fwrite(head, 1, 10, f) == 10 && std::fwrite(dict.data(), 1, dict.size(), f) == dict.size()
              && std::fwrite(data, 1, count * item, f) == count * item;
    return std::fclose(f) == 0 && ok;
}

}  // namespace mep_npy
