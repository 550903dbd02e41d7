"""Confine this process without namespaces, then exec the command (the `landlock` sandbox level, docs/sandbox.md).

Where no C compiler builds confine_exec.c (the same steps in a millisecond), run as a script by a bare
interpreter (`python -I -S -B confine_exec.py [-r|-w|-x|-d PATH]... [-s FD] [-a ABI] [-A ABI] [-u UID] [-k 1]
-p PROGRAM -- ARGV...`:
the standard library only, nothing of mepgen imported; an interpreter start and ctypes cost tens of
milliseconds):

1. `PR_SET_NO_NEW_PRIVS`: no set-uid program can raise what follows;
2. Landlock (Linux >= 5.13, unprivileged): a ruleset of the file system rights this process and every child keep:
   the folders and files POLICY names for reading, writing, executing and the device nodes (ioctl), nothing else;
   with ABI 4 no TCP bind or connect, with ABI 6 no abstract unix socket and no signal outside the domain;
   the rules are made here, in the child, so that `/proc/self` is this process (the exec keeps its pid);
3. the seccomp program (BPF, compiled by mepgen with libseccomp: seccomp_filter.compiled(strict=True)) read from
   descriptor `-s`: no sockets but local ones, no tracing, no namespaces, ...;
3b. as root: become user `-u` (all capabilities go with root), or else drop every capability (`-k 1` keeps them:
   Nsight Compute's counters);
4. execv PROGRAM with ARGV: Landlock lets only the `-x` files (and their ELF interpreter) be run.

-r read, -w read-write (no execute), -x read and execute, -d a device node (read, write, ioctl). It exits 111
with one line on stderr when a step fails: a half-confined candidate never runs.
"""
import stat
import ctypes
import os
import struct
import sys

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446    # the same number on every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = (
    1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12)
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
#: the rights a rule on a file (not a folder) may carry
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
EXIT_FAILED = 111

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def abi() -> int:
    """The Landlock ABI version of this kernel; 0 when it has none (too old, or the LSM not enabled)."""
    v = _libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return int(v) if v > 0 else 0


def handled_fs(version: int) -> int:
    mask = (1 << 13) - 1
    if version >= 2:
        mask |= REFER
    if version >= 3:
        mask |= TRUNCATE
    if version >= 5:
        mask |= IOCTL_DEV
    return mask


def _fail(what: str) -> None:
    err = ctypes.get_errno()
    sys.stderr.write(f"mepgen confinement: {what}: {os.strerror(err) if err else 'failed'}\n")
    sys.stderr.flush()
    os._exit(EXIT_FAILED)


def elf_interpreter(path: str):
    """The ELF interpreter (PT_INTERP) of executable `path`, or None (a static binary, a script, not ELF)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:          # 64-bit ELF only
                return None
            endian = "<" if head[5] == 1 else ">"
            phoff, = struct.unpack_from(endian + "Q", head, 32)
            phentsize, phnum = struct.unpack_from(endian + "HH", head, 54)
            for i in range(phnum):
                fh.seek(phoff + i * phentsize)
                p_type, _, offset, _, _, filesz = struct.unpack(endian + "IIQQQQ", fh.read(40))
                if p_type == 3:                                   # PT_INTERP
                    fh.seek(offset)
                    return fh.read(filesz).rstrip(b"\0").decode()
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


def _add(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return                                    # not on this machine: nothing to allow
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        if not rights:
            return
        attr = struct.pack("=Qi", rights, fd)     # struct landlock_path_beneath_attr (packed)
        buf = ctypes.create_string_buffer(attr, len(attr))
        if _libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, buf, 0) != 0:
            _fail(f"landlock rule for {path}")
    finally:
        os.close(fd)


def landlock(policy: dict, version: int) -> None:
    fs = handled_fs(version)
    attr = struct.pack("=QQQ", fs, NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0,
                       SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0)
    size = 8 if version < 4 else 16 if version < 6 else 24
    buf = ctypes.create_string_buffer(attr[:size], size)
    ruleset = _libc.syscall(SYS_CREATE_RULESET, buf, ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        _fail("landlock_create_ruleset")
    read = READ_FILE | READ_DIR
    write = fs & ~EXECUTE & ~IOCTL_DEV & ~MAKE_CHAR & ~MAKE_BLOCK        # no device node made in a scratch folder
    for p in policy.get("read", []):
        _add(ruleset, p, read)
    for p in policy.get("write", []):
        _add(ruleset, p, write)
    for p in policy.get("dev", []):
        _add(ruleset, p, READ_FILE | WRITE_FILE | (IOCTL_DEV & fs))
    for p in ["/proc/self", "/proc/thread-self"]:       # this process (the exec keeps its pid)
        _add(ruleset, os.path.realpath(p), read)
    # its threads' files (a thread's name: pthread_setname_np writes /proc/self/task/TID/comm; the CUDA driver
    # names its threads so and fails cuInit with CUDA_ERROR_OPERATING_SYSTEM when it cannot)
    _add(ruleset, os.path.realpath("/proc/self/task"), read | (fs & (WRITE_FILE | TRUNCATE)))
    for p in policy.get("exec", []):
        _add(ruleset, p, read | EXECUTE)
        interp = elf_interpreter(p)
        if interp:
            _add(ruleset, interp, READ_FILE | EXECUTE)
    if _libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:
        _fail("landlock_restrict_self")
    os.close(ruleset)


#: capset's number where it is known (the launcher fails closed elsewhere when it must drop root's capabilities)
SYS_CAPSET = {"x86_64": 126, "aarch64": 91, "ppc64le": 184, "s390x": 185}


def drop_root(uid, keep_caps: bool) -> None:
    """As root: become `uid` (and group), or else drop every capability (bounding set too)."""
    if os.geteuid() != 0 or (keep_caps and uid is None):
        return
    for cap in range(64):
        if _libc.prctl(23, cap, 0, 0, 0) != 1:     # PR_CAPBSET_READ: already out (a launcher a confined one started)
            continue
        if _libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:     # PR_CAPBSET_DROP; EINVAL: none
            _fail("dropping the bounding set")
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        return
    number = SYS_CAPSET.get(os.uname().machine)
    if number is None:
        sys.stderr.write("mepgen confinement: cannot drop root's capabilities on this architecture\n")
        os._exit(EXIT_FAILED)
    header = struct.pack("=Ii", 0x20080522, 0)                                  # _LINUX_CAPABILITY_VERSION_3
    hbuf, dbuf = ctypes.create_string_buffer(header, 8), ctypes.create_string_buffer(24)
    if _libc.syscall(number, hbuf, dbuf) != 0:
        _fail("capset")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def seccomp(fd: int) -> None:
    """Load the seccomp program held by descriptor `fd`."""
    program = b""
    try:
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            program += chunk
        os.close(fd)
    except OSError as e:
        sys.stderr.write(f"mepgen confinement: seccomp program unreadable: {e.strerror}\n")
        os._exit(EXIT_FAILED)
    if not program or len(program) % 8:
        _fail("seccomp program unreadable")
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        _fail("seccomp filter")


def parse(argv: list) -> tuple:
    """(policy, args) from `[-r|-w|-x|-d PATH]... [-s FD] [-a ABI] -p PROGRAM -- ARGV...`."""
    end = argv.index("--")
    policy = {"read": [], "write": [], "exec": [], "dev": [], "seccomp_fd": None, "abi_min": 1, "program": None,
              "uid": None, "keep_caps": False, "abi_cap": 0}
    lists = {"-r": "read", "-w": "write", "-x": "exec", "-d": "dev"}
    for flag, value in zip(argv[0:end:2], argv[1:end:2]):
        if flag in lists:
            policy[lists[flag]].append(value)
        elif flag == "-s":
            policy["seccomp_fd"] = int(value)
        elif flag == "-a":
            policy["abi_min"] = int(value)
        elif flag == "-A":
            policy["abi_cap"] = int(value)
        elif flag == "-p":
            policy["program"] = value
        elif flag == "-u":
            policy["uid"] = int(value)
        elif flag == "-k":
            policy["keep_caps"] = value == "1"
    return policy, argv[end + 1:]


def main(argv: list) -> None:
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.stderr.write("usage: confine_exec.py [-r|-w|-x|-d PATH]... -p PROGRAM -- ARGV...\n")
        os._exit(2)
    policy, args = parse(argv)
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail("no_new_privs")
    version = abi()
    if version < int(policy.get("abi_min", 1)):
        sys.stderr.write("mepgen confinement: Landlock is not available in this kernel\n")
        os._exit(EXIT_FAILED)
    if policy["abi_cap"] > 0:
        version = min(version, policy["abi_cap"])       # the newest ABI a GPU driver accepts here
    landlock(policy, version)
    drop_root(policy["uid"], policy["keep_caps"])
    if policy.get("seccomp_fd") is not None:
        seccomp(int(policy["seccomp_fd"]))
    try:
        os.execv(policy.get("program") or args[0], args)
    except OSError as e:
        sys.stderr.write(f"mepgen confinement: cannot run {args[0]}: {e.strerror}\n")
        os._exit(127 if isinstance(e, FileNotFoundError) else 126)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Exception as e:      # noqa: BLE001 (any step that breaks: never run the command half-confined)
        sys.stderr.write(f"mepgen confinement: {type(e).__name__}: {e}\n")
        os._exit(EXIT_FAILED)
