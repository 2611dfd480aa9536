# SPDX-License-Identifier: MIT
"""Thread settings, and concurrent Python callers of one model."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import pydepth


def test_set_num_threads_validates():
    old = pydepth.get_num_threads()
    try:
        pydepth.set_num_threads(3)
        assert pydepth.get_num_threads() == 3
        for bad in (0, -1, 1.5, "2", True, 1025, 10**6, None):
            with pytest.raises(pydepth.ThreadCountError):
                pydepth.set_num_threads(bad)
        assert pydepth.get_num_threads() == 3
    finally:
        pydepth.set_num_threads(old)


@pytest.mark.parametrize("value,expected", [("3", "3"), ("", str(os.cpu_count() or 1))])
def test_environment_default(tmp_path, value, expected):
    env = dict(os.environ, PYDEPTH_NUM_THREADS=value)
    out = subprocess.run([sys.executable, "-c", "import pydepth; print(pydepth.get_num_threads())"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    assert out.stdout.strip() == expected


@pytest.mark.parametrize("value", ["many", "0", "-2", "1025", "1.5"])
def test_bad_environment_value_warns_and_uses_the_default(tmp_path, value):
    """An import never fails on a bad environment variable (issue 11, item 6)."""
    env = dict(os.environ, PYDEPTH_NUM_THREADS=value)
    out = subprocess.run([sys.executable, "-c", "import pydepth; print(pydepth.get_num_threads())"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "PYDEPTH_NUM_THREADS" in out.stderr and repr(value) in out.stderr
    assert out.stdout.strip() == str(min(os.cpu_count() or 1, 1024))


def test_concurrent_forwards_are_bit_identical():
    model = pydepth.DecoderModel(pydepth.DecoderConfig(300, 32, 4, 48, 2, 32, kv_heads=2), pydepth.SplitMix64(3))
    ids = (np.arange(33) * 7919 + 11) % 300
    x = ids[:-1].reshape(1, -1)
    ref = model.forward(x).logits.value.view(np.uint64).copy()
    bad = []

    def work():
        for _ in range(40):
            with pydepth.no_grad():
                v = model.forward(x).logits.value
            if not np.array_equal(v.view(np.uint64), ref):
                bad.append(1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad
