# SPDX-License-Identifier: MIT
"""Platform-dependent helpers give the same meaning on every OS (issue 13)."""
import sys
import types

import pytest

from pydepth._native import _memory


@pytest.mark.parametrize("platform, expected_mib", [("linux", 2048.0), ("darwin", 2.0)])
def test_peak_rss_reads_the_unit_of_each_platform(monkeypatch, platform, expected_mib):
    if sys.platform == "win32":  # no getrusage: the working-set path is the one in use
        assert _memory.peak_rss_mb() > 0
        return
    import resource
    monkeypatch.setattr(resource, "getrusage", lambda who: types.SimpleNamespace(ru_maxrss=2**21))
    monkeypatch.setattr(sys, "platform", platform)
    assert _memory.peak_rss_mb() == expected_mib


def test_peak_rss_matches_the_kernel_high_water_mark_on_linux():
    if not sys.platform.startswith("linux"):
        assert _memory.peak_rss_mb() > 0
        return
    with open("/proc/self/status") as fh:
        hwm_kib = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    assert abs(_memory.peak_rss_mb() * 1024.0 - hwm_kib) <= 0.05 * hwm_kib
