"""How captured reference arrays are stored: as they are up to --compress-above, deflated (level 1, read back by
numpy's own np.load) above it, and as they are again above COMPRESS_AT_MOST, where compressing on one core took
minutes (an 8.5 GB image)."""
from __future__ import annotations

import numpy as np

from mepgen.capture import convert


def test_small_arrays_stay_npy_larger_ones_are_deflated_and_huge_ones_are_not(tmp_path, monkeypatch):
    (tmp_path / "after").mkdir()
    ramp = np.repeat(np.arange(64, dtype=np.float32), 64)               # 16 KiB that compresses well
    assert convert.save_array(tmp_path, "after/a.npy", ramp[:16], 1000) == "after/a.npy"
    rel = convert.save_array(tmp_path, "after/b.npy", ramp, 1000)
    assert rel == "after/b.npz" and (tmp_path / rel).stat().st_size < ramp.nbytes // 4
    assert np.array_equal(np.load(tmp_path / rel)["data"], ramp)
    assert np.array_equal(convert.load_array(tmp_path, rel), ramp)
    monkeypatch.setattr(convert, "COMPRESS_AT_MOST", 8 << 10)
    assert convert.save_array(tmp_path, "after/c.npy", ramp, 1000) == "after/c.npy"
    assert np.array_equal(convert.load_array(tmp_path, "after/c.npy"), ramp)
