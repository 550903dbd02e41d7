"""The `landlock` sandbox level (no namespaces): a native program's host part that tries to read a file of the
user's, write outside its scratch folder, open a network socket and start a shell is stopped at each attempt,
while it still reads its inputs and writes its scratch folder. The level is forced (never bubblewrap, even where
it is installed). CPU only: g++ builds the program; one nvcc test shows a build under the level."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from mepgen.errors import MepgenError
from mepgen.evaluate import confine_paths, confined, landlock_level, process, sandbox, seccomp_filter

needs_landlock = pytest.mark.skipif(landlock_level.abi() < 1, reason="the kernel has no Landlock (Linux >= 5.13)")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

#: each attempt prints `<what> yes|no`; the exec comes last (when it works, the shell prints `exec yes`)
PROBE = r"""
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
static void say(const char* what, bool ok) { std::printf("%s %s\n", what, ok ? "yes" : "no"); std::fflush(stdout); }
int main(int argc, char** argv) {
    // argv: secret, outside, input, scratch
    char buf[64];
    int fd = open(argv[1], O_RDONLY);
    say("read-secret", fd >= 0 && read(fd, buf, sizeof buf) > 0);
    fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    say("write-outside", fd >= 0 && write(fd, "x", 1) == 1);
    fd = open(argv[3], O_RDONLY);
    say("read-input", fd >= 0 && read(fd, buf, sizeof buf) > 0);
    fd = open((std::string(argv[4]) + "/mine.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    say("write-scratch", fd >= 0 && write(fd, "x", 1) == 1);
    say("socket-inet", socket(AF_INET, SOCK_STREAM, 0) >= 0);
    say("socket-udp6", socket(AF_INET6, SOCK_DGRAM, 0) >= 0);
    say("socket-netlink", socket(AF_NETLINK, SOCK_RAW, 0) >= 0);
    say("socket-unix", socket(AF_UNIX, SOCK_STREAM, 0) >= 0);
    char* const sh[] = {(char*)"/bin/sh", (char*)"-c", (char*)"echo exec yes", nullptr};
    execve("/bin/sh", sh, nullptr);
    say("exec", false);
    return 0;
}
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    d = tmp_path_factory.mktemp("probe")
    (d / "probe.cpp").write_text("#include <string>\n" + PROBE)
    subprocess.run(["g++", "-O0", "-o", str(d / "probe"), str(d / "probe.cpp")], check=True)
    return d / "probe"


@pytest.fixture
def layout(tmp_path):
    """A secret of the user's, an input set and a scratch folder inside a workspace, a path outside it."""
    secret = tmp_path / "home" / ".ssh" / "id_key"
    inputs = tmp_path / "app" / ".mepgen" / "meps" / "k" / "eval" / "inputs" / "set0"
    scratch = tmp_path / "app" / ".mepgen" / "meps" / "k" / "eval" / "work" / "run"
    for d in (secret.parent, inputs, scratch):
        d.mkdir(parents=True)
    secret.write_text("private key")
    (inputs / "x.npy").write_text("input data")
    return {"secret": secret, "inputs": inputs, "scratch": scratch, "outside": tmp_path / "outside.txt"}


def run_probe(probe, ws, level):
    args = [probe, ws["secret"], ws["outside"], ws["inputs"] / "x.npy", ws["scratch"]]
    confine = confined.for_run(level, [probe, ws["inputs"]], ws["scratch"], 1 << 20, gpu=False)
    done = process.run(args, 30, cwd=ws["scratch"], confine=confine)
    return dict(line.split() for line in done.stdout.splitlines() if len(line.split()) == 2), done


@needs_landlock
@needs_gxx
@pytest.mark.parametrize("which", ["c", "python"])
def test_every_attempt_of_the_host_part_is_stopped(probe, layout, which, monkeypatch):
    if which == "python":           # the launcher where no C compiler is found
        monkeypatch.setattr(landlock_level, "launcher_binary", lambda: None)
    elif landlock_level.launcher_binary() is None:
        pytest.skip("no C compiler builds the launcher here")
    seen, done = run_probe(probe, layout, "landlock")
    expect = {"read-secret": "no", "write-outside": "no", "read-input": "yes", "write-scratch": "yes",
              "socket-inet": "no", "socket-udp6": "no", "socket-netlink": "no", "socket-unix": "no", "exec": "no"}
    if seccomp_filter.compiled(strict=True) is None:     # without libseccomp only Landlock's TCP rule holds
        expect = {k: v for k, v in expect.items() if not k.startswith("socket")}
        seen = {k: v for k, v in seen.items() if not k.startswith("socket")}
    assert seen == expect, done.stderr
    assert not layout["outside"].exists()
    assert (layout["scratch"] / "mine.txt").read_text() == "x"


@needs_gxx
def test_the_same_program_reaches_everything_unconfined(probe, layout):
    """The control: under resource limits alone every attempt succeeds (the test above is not vacuous)."""
    seen, done = run_probe(probe, layout, "rlimits")
    assert seen["read-secret"] == seen["write-outside"] == seen["socket-inet"] == seen["exec"] == "yes", done.stdout


@needs_landlock
def test_python_under_the_level_sees_only_what_it_is_given(layout):
    """The pycuda worker is a Python: with its installation readable it starts, and the user's files stay out of
    reach; its HOME and TMPDIR are its own scratch folder."""
    c = confined.for_worker("landlock", hide=[layout["inputs"]], gpu=False)
    code = (f"import os\ntry:\n    open({str(layout['secret'])!r}).read(); print('secret yes')\n"
            "except OSError:\n    print('secret no')\nprint('home', os.environ['HOME'])\n"
            "open(os.path.join(os.environ['TMPDIR'], 't'), 'w').write('x'); print('tmp yes')")
    done = process.run([sys.executable, "-c", code], 60, confine=c)
    lines = done.stdout.split("\n")
    assert lines[0] == "secret no" and lines[2] == "tmp yes", done.stderr
    assert "mepgen-scratch-" in lines[1]


def launchers() -> list[list[str]]:
    native = landlock_level.launcher_binary()
    return [[sys.executable, "-I", "-S", str(landlock_level.LAUNCHER)]] + ([[str(native)]] if native else [])


@needs_landlock
@pytest.mark.parametrize("which", ["python", "c"])
def test_a_failing_step_never_runs_the_command_half_confined(which, tmp_path):
    head = dict(zip(["python", "c"], launchers())).get(which) or pytest.skip("no C compiler")
    done = subprocess.run(head + ["-a", "99", "-p", "/bin/echo", "--", "echo", "ran"], capture_output=True, text=True)
    assert done.returncode == 111 and "Landlock is not available" in done.stderr and "ran" not in done.stdout
    done = subprocess.run(head + ["-s", "9999", "-p", "/bin/echo", "--", "echo", "ran"], capture_output=True,
                          text=True)
    assert done.returncode == 111 and "seccomp" in done.stderr and "ran" not in done.stdout


def test_a_forced_level_that_does_not_work_is_refused(monkeypatch):
    monkeypatch.setattr(landlock_level, "abi", lambda: 0)
    with pytest.raises(MepgenError, match="evaluate.sandbox is 'landlock' but that level does not work here.*"
                                          "no Landlock"):
        sandbox.resolve("landlock")
    assert sandbox.resolve("rlimits") == "rlimits"


def test_the_elf_interpreter_is_read_from_the_binary():
    sys.path.insert(0, str(landlock_level.LAUNCHER.parent))
    try:
        import confine_exec
    finally:
        sys.path.pop(0)
    interp = confine_exec.elf_interpreter(shutil.which("true") or "/bin/true")
    assert interp is None or Path(interp).exists()          # None for a static binary
    assert confine_exec.elf_interpreter(__file__) is None
    assert confine_exec.handled_fs(1) == (1 << 13) - 1 and confine_exec.handled_fs(5) >> 15 & 1


@needs_landlock
@pytest.mark.nvcc
def test_nvcc_builds_under_the_level_but_cannot_include_a_file_of_the_user(layout, tmp_path):
    src = tmp_path / "app" / "k.cu"
    src.write_text(f'#include "{layout["secret"]}"\n__global__ void k() {{}}\n')
    ok = tmp_path / "app" / "ok.cu"
    ok.write_text("#include <cstdio>\n__global__ void k() {}\n")
    out = layout["scratch"] / "build"
    for f, expect in ((ok, 0), (src, None)):
        cmd = ["nvcc", "-E", str(f), "-o", str(out / "k.ii")]
        confine = confined.for_build("landlock", cmd, tmp_path / "app", out, [f])
        done = process.run(cmd, 120, confine=confine)
        if expect == 0:
            assert done.returncode == 0, done.stderr
        else:
            assert done.returncode != 0 and "id_key" in done.stderr


@needs_landlock
@pytest.mark.skipif(os.geteuid() != 0, reason="what root keeps: only when mepgen runs as root")
@pytest.mark.parametrize("open_folder", [False, True])
@pytest.mark.parametrize("which", ["c", "python"])
def test_root_keeps_no_capability_and_becomes_nobody_where_it_can(tmp_path, open_folder, which, monkeypatch):
    """As root, a candidate under landlock becomes `nobody` where every folder it uses is open to others, else it
    stays root without any capability (no device node, no clock, no raw disk); never with root's powers."""
    if which == "python":
        monkeypatch.setattr(landlock_level, "launcher_binary", lambda: None)
    base = Path("/tmp") if open_folder else tmp_path          # pytest's folder is closed to others (0700)
    scratch = Path(tempfile.mkdtemp(dir=base, prefix="mepgen-root-"))
    os.chmod(scratch, 0o755)
    try:
        c = confined.for_run("landlock", [], scratch / "run", 1 << 20, gpu=False)
        done = process.run(["cat", "/proc/self/status"], 30, confine=c)
        status = dict(line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)
        caps = [int(status[k].strip(), 16) for k in ("CapEff", "CapPrm", "CapBnd")]
        assert caps == [0, 0, 0], done.stdout + done.stderr
        uid = int(status["Uid"].split()[0])
        assert uid == (confine_paths.NOBODY if c.drops_root else 0)
        if open_folder:
            assert c.drops_root, "every folder is open to others here: it should run as nobody"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_a_launcher_someone_else_could_replace_is_never_run(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)                            # as a folder in a shared /tmp made by another user would be
    assert not landlock_level._ours(shared)
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    assert landlock_level._ours(mine)
    link = tmp_path / "link"
    link.symlink_to(mine)
    assert not landlock_level._ours(link)


@needs_landlock
@pytest.mark.skipif(os.geteuid() != 0, reason="who owns the shared worker scratch matters only when mepgen runs as root")
def test_a_worker_that_stays_root_writes_the_scratch_an_earlier_nobody_worker_owned():
    """Workers under landlock share one scratch folder (HOME, TMPDIR). One that ran as `nobody` left it nobody's
    (mode 0700), and a file in it; the next one, kept root without capabilities, must still write both (it failed
    in the full suite after an earlier test's worker, and on a GPU host where workers ran as nobody)."""
    scratch = landlock_level.worker_scratch()
    Path(scratch, "t").write_text("left by a worker that ran as nobody")
    os.chown(Path(scratch, "t"), confine_paths.NOBODY, confine_paths.NOBODY)
    os.chown(scratch, confine_paths.NOBODY, confine_paths.NOBODY)
    c = confined.for_worker("landlock", gpu=False)
    c.keep_root = True
    code = ("import os, sys; t = os.environ['TMPDIR']; s = os.stat(t); "
            "print('uid', os.getuid(), 'folder', t, oct(s.st_mode), s.st_uid, file=sys.stderr); "
            "open(os.path.join(t, 't'), 'w').write('x'); print('tmp yes')")
    done = process.run([sys.executable, "-c", code], 60, confine=c)
    assert done.stdout.strip() == "tmp yes", (done.stderr, c.command([sys.executable])[:40])


@needs_landlock
@pytest.mark.parametrize("which", ["python", "c"])
def test_a_capped_abi_keeps_the_older_rules_and_drops_only_the_newer(which, tmp_path):
    """`-A N` (a GPU driver that refuses a CUDA context under a newer ABI's rules): the file rules of ABI N stay
    (a file outside the policy is unreadable), what later ABIs add goes (the TCP rule of ABI 4: a connect to a
    loopback listener is refused at the kernel's ABI and goes through at ABI 3)."""
    if landlock_level.abi() < 4:
        pytest.skip("the kernel's Landlock has no TCP rule (ABI < 4)")
    head = dict(zip(["python", "c"], launchers())).get(which) or pytest.skip("no C compiler")
    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    system = [a for p in ("/usr", "/lib", "/lib64", "/etc") for a in ("-r", p)]
    bash = str(Path(shutil.which("bash")).resolve())
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]

    def run(cap, script):
        return subprocess.run(head + system + ["-x", bash, "-A", str(cap), "-p", bash, "--", "bash", "-c", script],
                              capture_output=True, text=True, timeout=30)
    try:
        connect = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
        full, capped = run(0, connect), run(3, connect)
    finally:
        listener.close()
    assert full.returncode != 0 and "connected" not in full.stdout, full.stdout + full.stderr
    assert capped.returncode == 0 and "connected" in capped.stdout, capped.stderr
    done = run(1, f"read -r line < {secret} && echo $line")            # a builtin: no other program runs
    assert done.returncode != 0 and "private" not in done.stdout and "Permission denied" in done.stderr


@needs_landlock
@pytest.mark.parametrize("which", ["python", "c"])
def test_a_confined_process_names_its_threads_but_writes_no_other_proc_file(which):
    """The CUDA driver names its threads (pthread_setname_np writes /proc/self/task/TID/comm) and fails cuInit
    with CUDA_ERROR_OPERATING_SYSTEM when it cannot: seen on an H200 host at every Landlock ABI. A thread's own
    files are writable; the process's others under /proc are not."""
    head = dict(zip(["python", "c"], launchers())).get(which) or pytest.skip("no C compiler")
    system = [a for p in ("/usr", "/lib", "/lib64", "/etc") for a in ("-r", p)]
    bash = str(Path(shutil.which("bash")).resolve())
    script = ('echo mg-thread > /proc/self/task/$$/comm && read -r name < /proc/self/task/$$/comm && echo "$name"; '
              'echo 500 > /proc/self/oom_score_adj && echo oom-written')
    done = subprocess.run(head + system + ["-x", bash, "-p", bash, "--", "bash", "-c", script], capture_output=True,
                          text=True, timeout=30)
    assert done.stdout.splitlines()[:1] == ["mg-thread"], done.stderr
    assert "oom-written" not in done.stdout and "Permission denied" in done.stderr


@needs_landlock
@pytest.mark.parametrize("which", ["python", "c"])
def test_a_filter_that_allows_unix_sockets_still_refuses_every_other_family(which):
    """The fallback for a GPU driver that needs a socket (sandbox.gpu_policy): AF_UNIX goes through, AF_INET,
    AF_INET6 and AF_NETLINK stay refused; the strict filter refuses all four."""
    if seccomp_filter.compiled(strict=True) is None:
        pytest.skip("libseccomp is not installed")
    head = dict(zip(["python", "c"], launchers())).get(which) or pytest.skip("no C compiler")
    code = ("import socket\nfor f in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK):\n"
            "    try:\n        socket.socket(f, socket.SOCK_DGRAM).close(); print(f.name, 'yes')\n"
            "    except OSError:\n        print(f.name, 'no')\n")
    seen = {}
    for families in ((), (socket.AF_UNIX,)):
        fd = seccomp_filter.open_fd(strict=True, families=families)
        try:
            done = subprocess.run(head + ["-r", "/", "-x", sys.executable, "-s", str(fd), "-p", sys.executable, "--",
                                          sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                                  pass_fds=(fd,))
        finally:
            os.close(fd)
        seen[families] = dict(line.split() for line in done.stdout.splitlines())
    assert seen[()] == {"AF_UNIX": "no", "AF_INET": "no", "AF_INET6": "no", "AF_NETLINK": "no"}
    assert seen[(socket.AF_UNIX,)] == {"AF_UNIX": "yes", "AF_INET": "no", "AF_INET6": "no", "AF_NETLINK": "no"}


@needs_landlock
@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/etc/shadow"),
                    reason="what a process kept root may read of /etc: only when mepgen runs as root")
@pytest.mark.parametrize("which", ["c", "python"])
def test_a_process_kept_root_reads_what_it_needs_of_etc_but_not_its_secrets(tmp_path, which, monkeypatch):
    """Kept root (a folder it reads is closed to others), it still owns /etc/shadow: it gets the loader's and the
    system's files of /etc by name, never the folder."""
    if which == "python":
        monkeypatch.setattr(landlock_level, "launcher_binary", lambda: None)
    (tmp_path / "run").mkdir()
    c = confined.for_run("landlock", [], tmp_path / "run", 1 << 20, gpu=False)     # pytest's tmp_path: 0700
    assert not c.drops_root
    done = process.run(["sh", "-c", "(: </etc/passwd) 2>/dev/null && echo passwd yes; "
                                    "(: </etc/shadow) 2>/dev/null && echo shadow yes; echo done"], 30, confine=c)
    assert done.stdout.split() == ["passwd", "yes", "done"], done.stdout + done.stderr


@pytest.mark.parametrize("which", ["python", "c"])
def test_unix_sockets_that_reach_nothing_by_name(which, tmp_path):
    """The GPU rung before plain AF_UNIX (sandbox.gpu_policy): a process makes unix sockets and pairs and talks
    over a pair, but connects to no named socket (as root, the container runtime's would be one) and sends to no
    address; other families stay refused."""
    if seccomp_filter.compiled(strict=True, families=(socket.AF_UNIX,), local=True) is None:
        pytest.skip("libseccomp is not installed")
    head = dict(zip(["python", "c"], launchers())).get(which) or pytest.skip("no C compiler")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(tmp_path / "s"))
    server.listen(1)
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dgram.bind(str(tmp_path / "d"))
    code = ("import socket, sys\n"
            "def t(name, f):\n    try:\n        f(); print(name, 'yes')\n    except OSError:\n        print(name, 'no')\n"
            "t('make', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())\n"
            "a, b = socket.socketpair()\n"
            "t('pair', lambda: (a.send(b'x'), b.recv(1)))\n"
            "t('connect', lambda: socket.socket(socket.AF_UNIX).connect(sys.argv[1]))\n"
            "t('sendto', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'x', sys.argv[2]))\n"
            "t('inet', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())\n")
    fd = seccomp_filter.open_fd(strict=True, families=(socket.AF_UNIX,), local=True)
    try:
        done = subprocess.run(head + ["-r", "/", "-x", sys.executable, "-s", str(fd), "-p", sys.executable, "--",
                                      sys.executable, "-c", code, str(tmp_path / "s"), str(tmp_path / "d")],
                              capture_output=True, text=True, timeout=60, pass_fds=(fd,))
    finally:
        os.close(fd)
        server.close()
        dgram.close()
    seen = dict(line.split() for line in done.stdout.splitlines())
    assert seen == {"make": "yes", "pair": "yes", "connect": "no", "sendto": "no", "inet": "no"}, done.stderr


def test_the_worker_s_links_to_its_packages_follow_the_package(tmp_path, monkeypatch):
    """The worker finds its packages through links in its scratch folder; where the package is found elsewhere later
    in the same process (sys.path changed), the link is made again, never left to the old folder."""
    monkeypatch.setattr(landlock_level, "worker_scratch", lambda: str(tmp_path / "scratch"))
    (tmp_path / "scratch").mkdir()
    first, second = tmp_path / "a" / "pkg", tmp_path / "b" / "pkg"
    for p in (first, second):
        p.mkdir(parents=True)
    where = {"pkg": first}
    monkeypatch.setattr(landlock_level, "package_folders", lambda name: [where[name]])
    site = landlock_level.worker_site(("pkg",))
    assert (site / "pkg").resolve() == first
    assert landlock_level.worker_site(("pkg",)) == site and (site / "pkg").resolve() == first    # kept as it is
    where["pkg"] = second
    landlock_level.worker_site(("pkg",))
    assert (site / "pkg").resolve() == second and sorted(p.name for p in site.iterdir()) == ["pkg"]
