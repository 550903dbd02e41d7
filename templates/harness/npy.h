// npy.h -- the minimal .npy (format 1.0/2.0, C order) reader and writer the MEP harness needs.
// Inputs are made in Python (numpy) and outputs are compared there, so the harness speaks .npy.
namespace mep_npy {

struct Array {
    std::string descr;
    size_t count = 0;
    std::vector<unsigned char> bytes;
};

// Reads PATH; on failure returns false and says why in *error.
inline bool load(const std::string& path, Array* out, std::string* error)
{
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) { *error = "cannot open " + path; return false; }
    unsigned char magic[8];
    if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
        std::fclose(f); *error = path + " is not a .npy file"; return false;
    }
    size_t header_len = 0;
    if (magic[6] == 1) {
        unsigned char b[2];
        if (std::fread(b, 1, 2, f) != 2) { std::fclose(f); *error = path + ": truncated header"; return false; }
        header_len = b[0] | (b[1] << 8);
    } else {
        unsigned char b[4];
        if (std::fread(b, 1, 4, f) != 4) { std::fclose(f); *error = path + ": truncated header"; return false; }
        header_len = b[0] | (b[1] << 8) | (b[2] << 16) | ((size_t)b[3] << 24);
    }
    std::string header(header_len, ' ');
    if (std::fread(&header[0], 1, header_len, f) != header_len) {
        std::fclose(f); *error = path + ": truncated header"; return false;
    }
    size_t d = header.find("'descr'");
    size_t q1 = header.find('\'', header.find(':', d) + 1);
    size_t q2 = header.find('\'', q1 + 1);
    if (d == std::string::npos || q1 == std::string::npos || q2 == std::string::npos) {
        std::fclose(f); *error = path + ": no descr in the header"; return false;
    }
    out->descr = header.substr(q1 + 1, q2 - q1 - 1);
    if (header.find("'fortran_order': True") != std::string::npos) {
        std::fclose(f); *error = path + ": Fortran order is not supported"; return false;
    }
    size_t s1 = header.find('(', header.find("'shape'")), s2 = header.find(')', s1);
    if (s1 == std::string::npos || s2 == std::string::npos) {
        std::fclose(f); *error = path + ": no shape in the header"; return false;
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
    out->bytes.resize(count * item);
    if (std::fread(out->bytes.data(), 1, out->bytes.size(), f) != out->bytes.size()) {
        std::fclose(f); *error = path + ": fewer data bytes than the header says"; return false;
    }
    std::fclose(f);
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
