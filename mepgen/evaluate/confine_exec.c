/* confine_exec.c: confine this process without namespaces, then exec the command (the `landlock` sandbox level,
 * docs/sandbox.md). The same steps and arguments as confine_exec.py, which runs where no C compiler is found:
 * mepgen builds this file once with the host compiler (landlock_level.py) because a process start costs a
 * millisecond here and tens of milliseconds in an interpreter.
 *
 *   confine_exec [-r PATH]... [-w PATH]... [-x PATH]... [-d PATH]... [-s FD] [-a ABI] [-A ABI] [-u UID] [-k 1]
 *                -p PROGRAM -- ARGV...
 *
 * -r read, -w read-write (no execute, no device nodes made), -x read and execute (with its ELF interpreter),
 * -d a device node (read, write, ioctl), -s the descriptor holding the seccomp program (BPF), -a the least
 * Landlock ABI, -A the newest ABI to use (0: the kernel's; a GPU driver may refuse a CUDA context under a
 * newer ABI's rules: sandbox.gpu_policy), -u the user (and group) to become when started as root, -k 1: as root, keep the capabilities
 * (Nsight Compute's counters), -p the file to execute with ARGV. Steps: no_new_privs, the Landlock ruleset
 * (/proc/self and /proc/thread-self readable, its threads' files under /proc/self/task writable), as root: another user (-u) or no capability at all, the seccomp
 * filter, execv. Exit 111 with one line on stderr when a step fails. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXIT_FAILED 111
#define SYS_CREATE_RULESET 444
#define SYS_ADD_RULE 445
#define SYS_RESTRICT_SELF 446

enum { EXECUTE = 1 << 0, WRITE_FILE = 1 << 1, READ_FILE = 1 << 2, READ_DIR = 1 << 3, MAKE_CHAR = 1 << 6,
       MAKE_BLOCK = 1 << 11, REFER = 1 << 13,
       TRUNCATE = 1 << 14, IOCTL_DEV = 1 << 15 };
#define FILE_RIGHTS (EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV)

struct ruleset_attr { uint64_t fs, net, scoped; };
struct __attribute__((packed)) path_beneath { uint64_t allowed; int32_t fd; };

static void fail(const char* what)
{
    fprintf(stderr, "mepgen confinement: %s: %s\n", what, errno ? strerror(errno) : "failed");
    _exit(EXIT_FAILED);
}

static uint64_t handled_fs(int abi)
{
    uint64_t mask = (1ULL << 13) - 1;
    if (abi >= 2) mask |= REFER;
    if (abi >= 3) mask |= TRUNCATE;
    if (abi >= 5) mask |= IOCTL_DEV;
    return mask;
}

static void add(int ruleset, const char* path, uint64_t rights)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return;                                   /* not on this machine: nothing to allow */
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) rights &= FILE_RIGHTS;
    struct path_beneath attr = {rights, fd};
    if (rights && syscall(SYS_ADD_RULE, ruleset, 1, &attr, 0) != 0) {
        char msg[PATH_MAX + 32];
        snprintf(msg, sizeof msg, "landlock rule for %s", path);
        fail(msg);
    }
    close(fd);
}

/* the ELF interpreter of a 64-bit executable, or 0 */
static int interpreter(const char* path, char* out, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    Elf64_Ehdr eh;
    int found = 0;
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0
        && eh.e_ident[EI_CLASS] == ELFCLASS64) {
        for (int i = 0; i < eh.e_phnum && !found; ++i) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, eh.e_phoff + (off_t)i * eh.e_phentsize) != (ssize_t)sizeof ph) break;
            if (ph.p_type == PT_INTERP && ph.p_filesz < size) {
                found = pread(fd, out, ph.p_filesz, ph.p_offset) == (ssize_t)ph.p_filesz;
                out[ph.p_filesz] = 0;
            }
        }
    }
    close(fd);
    return found;
}

/* as root: become `uid` (all capabilities go with root), or else drop every capability (bounding set too) */
static void drop_root(long uid, int keep_caps)
{
    if (geteuid() != 0 || (keep_caps && uid < 0)) return;
    for (int cap = 0; cap <= 63; ++cap) {
        /* a capability already out of the set stays out (a launcher started by a confined one, which has none
           left and could not drop one: memcheck's target) */
        if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 1) continue;
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) fail("dropping the bounding set");
    }
    if (uid >= 0) {
        if (setgroups(0, NULL) != 0) fail("setgroups");
        if (setresgid((gid_t)uid, (gid_t)uid, (gid_t)uid) != 0) fail("setresgid");
        if (setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0) fail("setresuid");
        return;
    }
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &hdr, data) != 0) fail("capset");
}

static void load_seccomp(int fd)
{
    static unsigned char program[1 << 16];
    size_t n = 0;
    ssize_t got;
    while ((got = read(fd, program + n, sizeof program - n)) > 0) n += (size_t)got;
    close(fd);
    if (n == 0 || n % sizeof(struct sock_filter)) { errno = 0; fail("seccomp program unreadable"); }
    struct sock_fprog prog = {(unsigned short)(n / sizeof(struct sock_filter)), (struct sock_filter*)program};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) fail("seccomp filter");
}

int main(int argc, char** argv)
{
    int end = 1;
    while (end < argc && strcmp(argv[end], "--") != 0) end += 2;
    if (end >= argc - 1) { fprintf(stderr, "usage: confine_exec [-r|-w|-x|-d PATH]... -p PROGRAM -- ARGV...\n"); return 2; }
    const char* program = argv[end + 1];
    int seccomp_fd = -1, abi_min = 1, abi_cap = 0, keep_caps = 0;
    long uid = -1;
    for (int i = 1; i < end; i += 2) {
        if (i + 1 >= end) break;
        if (strcmp(argv[i], "-p") == 0) program = argv[i + 1];
        else if (strcmp(argv[i], "-s") == 0) seccomp_fd = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-a") == 0) abi_min = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-A") == 0) abi_cap = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-u") == 0) uid = atol(argv[i + 1]);
        else if (strcmp(argv[i], "-k") == 0) keep_caps = atoi(argv[i + 1]);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("no_new_privs");
    long abi = syscall(SYS_CREATE_RULESET, NULL, 0, 1);
    if (abi < abi_min) { fprintf(stderr, "mepgen confinement: Landlock is not available in this kernel\n"); return EXIT_FAILED; }
    if (abi_cap > 0 && abi > abi_cap) abi = abi_cap;      /* the newest ABI a GPU driver accepts here */
    const uint64_t fs = handled_fs((int)abi);
    struct ruleset_attr attr = {fs, abi >= 4 ? 3u : 0u, abi >= 6 ? 3u : 0u};   /* no TCP; scoped unix sockets, signals */
    size_t attr_size = abi < 4 ? 8 : abi < 6 ? 16 : 24;
    int ruleset = (int)syscall(SYS_CREATE_RULESET, &attr, attr_size, 0);
    if (ruleset < 0) fail("landlock_create_ruleset");
    const uint64_t read_rights = READ_FILE | READ_DIR, write_rights = fs & ~(uint64_t)(EXECUTE | IOCTL_DEV | MAKE_CHAR | MAKE_BLOCK);
    for (int i = 1; i + 1 < end; i += 2) {
        const char* p = argv[i + 1];
        if (strcmp(argv[i], "-r") == 0) add(ruleset, p, read_rights);
        else if (strcmp(argv[i], "-w") == 0) add(ruleset, p, write_rights);
        else if (strcmp(argv[i], "-d") == 0) add(ruleset, p, READ_FILE | WRITE_FILE | (IOCTL_DEV & fs));
        else if (strcmp(argv[i], "-x") == 0) {
            add(ruleset, p, read_rights | EXECUTE);
            char interp[PATH_MAX];
            if (interpreter(p, interp, sizeof interp)) add(ruleset, interp, READ_FILE | EXECUTE);
        }
    }
    const char* own[] = {"/proc/self", "/proc/thread-self"};
    for (int i = 0; i < 2; ++i) {
        char real[PATH_MAX];
        if (realpath(own[i], real)) add(ruleset, real, read_rights);
    }
    /* its threads' files (a thread's name: pthread_setname_np writes /proc/self/task/TID/comm; the CUDA driver names
     * its threads so and fails cuInit with CUDA_ERROR_OPERATING_SYSTEM when it cannot) */
    char tasks[PATH_MAX];
    if (realpath("/proc/self/task", tasks)) add(ruleset, tasks, read_rights | (fs & (WRITE_FILE | TRUNCATE)));
    if (syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0) fail("landlock_restrict_self");
    close(ruleset);
    drop_root(uid, keep_caps);
    if (seccomp_fd >= 0) load_seccomp(seccomp_fd);
    execv(program, argv + end + 1);
    fprintf(stderr, "mepgen confinement: cannot run %s: %s\n", program, strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
