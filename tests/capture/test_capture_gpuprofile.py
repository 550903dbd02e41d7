"""`mepgen capture --gpu-times`: the injector's per-function activity totals, summed over the run's processes."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from mepgen.capture.gpuprofile import configs_of, merge
from mepgen.cli import main


def test_totals_of_every_process_add_up_per_kernel():
    statuses = [{"gpu": {"enabled": True, "kernels": {"k(float*)": [3, 3_000_000, 900_000, 1_200_000],
                                                      "j(int)": [1, 50_000, 50_000, 50_000]}}},
                {"gpu": {"enabled": True, "kernels": {"k(float*)": [1, 800_000, 800_000, 800_000]}}},
                {"phase": "loaded"}]                   # a process that launched nothing
    got = merge(statuses)
    assert got["k(float*)"] == {"launches": 4, "total_ms": pytest.approx(3.8), "min_ms": pytest.approx(0.8),
                                "max_ms": pytest.approx(1.2), "configs": []}
    assert got["j(int)"]["launches"] == 1 and got["j(int)"]["total_ms"] == pytest.approx(0.05)


def test_gpu_times_needs_a_command_and_says_so_when_no_cuda_call_was_made(tmp_path):
    r = CliRunner().invoke(main, ["capture", "--gpu-times"])
    assert r.exit_code == 2 and "--gpu-times runs the application" in r.output
    r = CliRunner().invoke(main, ["capture", "--gpu-times", "--", "true"])
    assert r.exit_code == 3 and "made no CUDA call" in r.output


def test_launch_configurations_of_every_process_add_up_most_time_first():
    """CUPTI's rows per configuration: grid, block, dynamic shared bytes, launches, total ns."""
    statuses = [{"gpu": {"configs": {"k(float*)": [[64, 1, 1, 256, 1, 1, 0, 2, 2_000_000],
                                                  [128, 1, 1, 128, 1, 1, 0, 1, 500_000]]},
                         "configs_over": {"k(float*)": 3}}},
                {"gpu": {"configs": {"k(float*)": [[128, 1, 1, 128, 1, 1, 0, 4, 2_500_000],
                                                  [1, 2, 3]]}}}]         # a row of another injector: skipped
    got = configs_of(statuses, "k(float*)")
    assert got == [{"grid": [128, 1, 1], "block": [128, 1, 1], "shared_mem": 0, "launches": 5, "total_ms": 3.0},
                   {"grid": [64, 1, 1], "block": [256, 1, 1], "shared_mem": 0, "launches": 2, "total_ms": 2.0},
                   {"more": 3}]
    assert configs_of(statuses, "j(int)") == []
