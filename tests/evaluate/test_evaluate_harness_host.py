"""The native harness's host-side helpers, built with nvcc and run on the CPU (no GPU needed): compare.h widens
float16/float32 bits to the float64 numpy computes (so the GPU comparison's rule is verify.compare's whatever the
MEP's flags), digest.h digests bytes as mepgen/evaluate/output_digest.py does, and npy.h reads .npy files through a
mapping, refusing what it cannot read."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from mepgen import mepbuild
from mepgen.evaluate import output_digest as digest
from mepgen.templating import _SOURCE_TREE

pytestmark = pytest.mark.nvcc

PROGRAM = r"""
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <sys/stat.h>
#include "compare.h"
#include "digest.h"
#include "npy.h"
int main(int argc, char** argv)
{
    const std::string mode = argv[1];
    if (mode == "widen") {       // argv[2]: raw uint16 or uint32 bits in, argv[3]: uint64 bits out
        mep_npy::Array a;
        std::string error;
        if (!mep_npy::load(argv[2], &a, &error)) { std::printf("%s\n", error.c_str()); return 2; }
        std::vector<mepgen_u64> out(a.count);
        for (size_t i = 0; i < a.count; ++i) {
            if (a.descr == "<u2") { unsigned short b; std::memcpy(&b, a.bytes.data() + 2 * i, 2); out[i] = mepgen_wide_bits(b); }
            else { unsigned int b; std::memcpy(&b, a.bytes.data() + 4 * i, 4); out[i] = mepgen_wide_bits(b); }
        }
        return mep_npy::save(argv[3], "<u8", out.data(), out.size(), 8) ? 0 : 1;
    }
    if (mode == "digest") {      // digest.h's sums over a file's data bytes, word by word as the kernel adds them
        mep_npy::Array a;
        std::string error;
        if (!mep_npy::load(argv[2], &a, &error)) return 2;
        mepgen_dword sums[2] = {0, 0};
        for (size_t i = 0; 8 * i < a.bytes.size(); ++i) {
            mepgen_dword w = 0;
            for (size_t j = 0; j < 8 && 8 * i + j < a.bytes.size(); ++j) w |= (mepgen_dword)a.bytes.data()[8 * i + j] << (8 * j);
            sums[0] += mepgen_digest_word(w, mepgen_digest_key_a, i);
            sums[1] += mepgen_digest_word(w, mepgen_digest_key_b, i);
        }
        std::printf("%016llx %016llx\n", sums[0], sums[1]);
        return 0;
    }
    mep_npy::Array a;        // "load": descr, count and a copy of the data through save
    std::string error;
    if (!mep_npy::load(argv[2], &a, &error)) { std::printf("error: %s\n", error.c_str()); return 2; }
    std::printf("%s %zu\n", a.descr.c_str(), a.count);
    return mep_npy::save(argv[3], a.descr, a.bytes.data(), a.count, a.count ? a.bytes.size() / a.count : 1) ? 0 : 1;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    d = tmp_path_factory.mktemp("host")
    (d / "main.cu").write_text(PROGRAM)
    exe = d / "main"
    done = subprocess.run([mepbuild.nvcc_executable(), "-std=c++17", "-I", str(_SOURCE_TREE / "harness"),
                           str(d / "main.cu"), "-o", str(exe)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return exe


def _widen(program, tmp_path, bits: np.ndarray) -> np.ndarray:
    np.save(tmp_path / "bits.npy", bits)
    subprocess.run([program, "widen", tmp_path / "bits.npy", tmp_path / "wide.npy"], check=True, timeout=60)
    return np.load(tmp_path / "wide.npy")


def _same_values(wide_bits: np.ndarray, expected: np.ndarray) -> None:
    got = wide_bits.view(np.float64)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint64), expected[~nan].view(np.uint64))   # -0.0, subnormals, Inf


def test_every_float16_widens_to_numpy_s_float64(program, tmp_path):
    bits = np.arange(1 << 16, dtype=np.uint16)
    _same_values(_widen(program, tmp_path, bits), bits.view(np.float16).astype(np.float64))


def test_float32_bits_widen_exactly_subnormals_included(program, tmp_path):
    rng = np.random.default_rng(7)
    special = np.array([0, 0x80000000, 1, 0x807FFFFF, 0x00400000, 0x00800000, 0x7F7FFFFF, 0x7F800000, 0xFF800000,
                        0x7FC00000, 0x7F800001, 0x3F800000], np.uint32)
    subnormal = rng.integers(1, 1 << 23, 2000, dtype=np.uint32) | (rng.integers(0, 2, 2000, dtype=np.uint32) << 31)
    bits = np.concatenate([special, subnormal, rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)])
    with np.errstate(invalid="ignore"):            # numpy quiets a signaling NaN, and says so
        expected = bits.view(np.float32).astype(np.float64)
    _same_values(_widen(program, tmp_path, bits), expected)


@pytest.mark.parametrize("arr", [np.arange(1000, dtype=np.float32), np.zeros((3, 4), np.int64),
                                 np.array([], np.float64), np.array([True, False])])
def test_npy_files_are_read_through_the_mapping(program, tmp_path, arr):
    np.save(tmp_path / "a.npy", arr)
    done = subprocess.run([program, "load", tmp_path / "a.npy", tmp_path / "b.npy"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout
    assert done.stdout.split() == [arr.dtype.str, str(arr.size)]
    assert np.load(tmp_path / "b.npy").tobytes() == arr.tobytes()


@pytest.mark.parametrize("content, why", [
    (b"", "is not a .npy file"),
    (b"not a numpy file at all", "is not a .npy file"),
    (None, "fewer data bytes than the header says"),
])
def test_npy_reader_refuses_what_it_cannot_read(program, tmp_path, content, why):
    f = tmp_path / "bad.npy"
    if content is None:                  # a header for 1000 floats, 10 of them there
        np.save(f, np.arange(1000, dtype=np.float32))
        f.write_bytes(f.read_bytes()[:-3960])
    else:
        f.write_bytes(content)
    done = subprocess.run([program, "load", f, tmp_path / "out.npy"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and why in done.stdout
    missing = subprocess.run([program, "load", tmp_path / "none.npy", tmp_path / "out.npy"], capture_output=True,
                             text=True, timeout=60)
    assert missing.returncode == 2 and "cannot open" in missing.stdout


@pytest.mark.parametrize("arr", [np.arange(10, dtype=np.float32), np.arange(1 << 16, dtype=np.float64),
                                 np.array([1, 2, 3], np.int8), np.array([], np.int32)])
def test_digest_h_and_digest_py_agree(program, tmp_path, arr):
    np.save(tmp_path / "a.npy", arr)
    done = subprocess.run([program, "digest", tmp_path / "a.npy"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.split() == list(digest.of_bytes(arr))


def test_a_digest_tells_a_changed_or_moved_element():
    arr = np.arange(4096, dtype=np.float32)
    base = digest.of_bytes(arr)
    swapped = arr.copy()
    swapped[[10, 11]] = swapped[[11, 10]]
    flipped = arr.copy()
    flipped.view(np.uint32)[100] ^= 1
    assert digest.of_bytes(swapped) != base and digest.of_bytes(flipped) != base
    assert digest.of_bytes(arr.copy()) == base and base[0] != base[1]
