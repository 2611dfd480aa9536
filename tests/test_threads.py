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
        for bad in (0, -1, 1.5, "2", True, 10**6):
            with pytest.raises(ValueError):
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


def test_bad_environment_value_is_refused(tmp_path):
    env = dict(os.environ, PYDEPTH_NUM_THREADS="many")
    out = subprocess.run([sys.executable, "-c", "import pydepth"], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    assert out.returncode != 0 and "PYDEPTH_NUM_THREADS" in out.stderr


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
