"""A seccomp filter for candidate processes, compiled by libseccomp (the C library every distribution ships,
through ctypes: its Python binding is not on PyPI) and loaded by bubblewrap (`--seccomp FD`).

It refuses (EPERM) the system calls a kernel under test never needs and that reach past the namespaces:
tracing and reading other processes, kernel modules and kexec, BPF and perf events, keyrings, mounts and new
namespaces, userfaultfd, file handles. Everything else is allowed: the list is the kind of deny list container
runtimes apply by default, under which CUDA programs run. Without libseccomp there is no filter (said once).

`strict=True` (the `landlock` level, where no network namespace exists): besides, `socket` for every family
(IP, packet, netlink, and AF_UNIX too: Landlock does not confine connecting to a named unix socket, and the
user's session bus or ssh agent are such sockets; `socketpair` stays) and io_uring (its requests open sockets
past the filter). System
calls of another architecture (32-bit `int 0x80`, x32) kill the process: libseccomp's default for a filter made
for the native one.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import tempfile
from functools import lru_cache

DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "bpf", "perf_event_open",
          "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
          "swapon", "swapoff", "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount",
          "unshare", "setns", "keyctl", "add_key", "request_key", "userfaultfd", "open_by_handle_at",
          "name_to_handle_at", "acct", "quotactl", "syslog", "iopl", "ioperm", "lookup_dcookie")
#: refused besides where the process has no network namespace
STRICT_DENIED = ("socket", "io_uring_setup", "io_uring_enter", "io_uring_register")
#: refused besides where a process may make AF_UNIX sockets but reach none by name (`local`): connecting, and
#: sending to an address (sendto with one; sendmsg and sendmmsg, whose address the filter cannot read): Landlock
#: does not confine connecting to a named unix socket, and as root that reaches e.g. the container runtime's
LOCAL_DENIED = ("connect", "sendmsg", "sendmmsg")
#: socket families the strict filter lets through (none by default; GPU processes may get AF_UNIX where the
#: driver needs it: sandbox.gpu_filter); every other family is refused with EPERM
STRICT_SOCKET_FAMILIES: tuple[int, ...] = ()


class _Cmp(ctypes.Structure):            # struct scmp_arg_cmp
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


_CMP_NE, _CMP_LT, _CMP_GT = 1, 2, 6
_ALLOW = 0x7FFF0000                       # SCMP_ACT_ALLOW
_ERRNO = 0x00050000                       # SCMP_ACT_ERRNO(x) = 0x00050000 | x


@lru_cache(maxsize=4)
def compiled(strict: bool = False, families: tuple[int, ...] | None = None, local: bool = False) -> bytes | None:
    """The BPF program (bytes), or None when libseccomp is not on this machine. `families`: the socket families
    the strict filter allows (default STRICT_SOCKET_FAMILIES: none); `local`: sockets reach nothing by name
    (LOCAL_DENIED, and sendto with an address)."""
    name = ctypes.util.find_library("seccomp")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
        lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.seccomp_release.argtypes = [ctypes.c_void_p]
        ctx = lib.seccomp_init(_ALLOW)
        if not ctx:
            return None
        try:
            families = tuple(sorted(set(families if families is not None else STRICT_SOCKET_FAMILIES)))
            lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                                   ctypes.POINTER(_Cmp)]
            for call in DENIED + (STRICT_DENIED if strict else ()) + (LOCAL_DENIED + ("sendto",) if local else ()):
                number = lib.seccomp_syscall_resolve_name(call.encode())
                if number < 0:
                    continue
                if call == "sendto":                       # refused with an address (its 5th argument) only
                    cmp = _Cmp(4, _CMP_NE, 0, 0)
                    if lib.seccomp_rule_add_array(ctx, _ERRNO | errno.EPERM, number, 1, ctypes.byref(cmp)) != 0:
                        return None
                elif call == "socket" and families:
                    if len(families) != 1:
                        return None          # one family at most: a rule compares an argument once
                    for op in (_CMP_LT, _CMP_GT):          # refused: any family below or above the one allowed
                        cmp = _Cmp(0, op, families[0], 0)
                        if lib.seccomp_rule_add_array(ctx, _ERRNO | errno.EPERM, number, 1, ctypes.byref(cmp)) != 0:
                            return None
                elif lib.seccomp_rule_add(ctx, _ERRNO | errno.EPERM, number, 0) != 0:
                    return None
            with tempfile.TemporaryFile() as fh:
                if lib.seccomp_export_bpf(ctx, fh.fileno()) != 0:
                    return None
                fh.seek(0)
                return fh.read()
        finally:
            lib.seccomp_release(ctx)
    except (OSError, AttributeError):
        return None


def open_fd(strict: bool = False, families: tuple[int, ...] | None = None, local: bool = False) -> int | None:
    """A file descriptor holding the program, for `bwrap --seccomp FD` or confine_exec (the caller passes it and
    closes it): the read end of a pipe holding the whole program (a few hundred bytes, far below a pipe's
    buffer), its write end closed. Not a memfd: a child started with a memfd among its descriptors took ~7 ms
    longer to run `true` (measured here), a pipe's read end nothing."""
    program = compiled(strict, families, local)
    if not program:
        return None
    r, w = os.pipe()
    try:
        os.write(w, program)
    finally:
        os.close(w)
    return r
