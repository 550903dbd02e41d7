"""A probe the pycuda worker runs at its start (tests only: this folder is put on its path): it stands for a
worker that candidate code has subverted, and tries what such code would. It reads the plan from
MEPGEN_TEST_PROBE (JSON: files to read, folders to list, files to write, a local port to connect to) and prints
what it reached on stderr as one line `MEPGEN-PROBE {json}` (a folder's entries: None when out of reach)."""
import json
import os
import socket
import sys


def _attempt(f) -> bool:
    try:
        f()
        return True
    except OSError:
        return False


def _connect(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def _probe(plan: dict) -> dict:
    found = {"uid": os.getuid(), "pid": os.getpid()}
    found["read"] = {p: _attempt(lambda p=p: open(p, "rb").read(1)) for p in plan.get("read", [])}
    found["list"] = {}
    for p in plan.get("list", []):
        try:
            found["list"][p] = sorted(os.listdir(p))
        except OSError:
            found["list"][p] = None
    found["write"] = {p: _attempt(lambda p=p: open(p, "w").write("x")) for p in plan.get("write", [])}
    if plan.get("connect"):
        found["connect"] = _attempt(lambda: _connect(plan["connect"]))
    return found


if os.environ.get("MEPGEN_TEST_PROBE"):
    print("MEPGEN-PROBE " + json.dumps(_probe(json.loads(os.environ["MEPGEN_TEST_PROBE"]))), file=sys.stderr,
          flush=True)
