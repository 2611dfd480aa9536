# SPDX-License-Identifier: MIT
"""A Dask scheduler killed mid-sweep: the command ends with one line naming the loss and exit 1
(no traceback), the finished parts are kept and verified, and the same command resumes."""
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("distributed", reason="sweeps on Dask need the 'sweep' extra")
pytest.importorskip("pyarrow", reason="sweeps need the 'sweep' extra")

from conftest import die_with_parent, free_port
from pydepth.sweep.store import part_files

ENV = dict(os.environ, PYDEPTH_NUM_THREADS="1")


@pytest.mark.skipif(os.name != "posix", reason="kills a scheduler process")
def test_a_scheduler_killed_mid_sweep_is_one_line_and_exit_1(tmp_path):
    address = f"tcp://127.0.0.1:{free_port()}"
    port = address.rsplit(":", 1)[1]
    procs = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", port,
                               "--dashboard-address", "127.0.0.1:0"], cwd=tmp_path, env=ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)]
    procs.append(subprocess.Popen([sys.executable, "-m", "dask", "worker", address, "--nthreads", "1", "--no-nanny",
                                   "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0"], cwd=tmp_path,
                                  env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  preexec_fn=die_with_parent))
    out = tmp_path / "out"
    sweep = None
    # 800 cells in many batches: still running when the first part lands, however fast cells get
    try:
        sweep = subprocess.Popen([sys.executable, "-m", "pydepth", "sweep", "--depths", "8,16", "--widths", "64",
                                  "--seeds", "0-199", "--sequence-length", "32", "--scheduler", address, "--quiet",
                                  "--out", str(out)], cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 90
        while not part_files(out) and sweep.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sweep.poll() is None, "the sweep ended before the scheduler could be killed: " + sweep.stderr.read()
        procs[0].kill()
        _, err = sweep.communicate(timeout=120)
    finally:
        for p in procs + ([sweep] if sweep else []):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert sweep.returncode == 1, err
    assert "Traceback" not in err and "scheduler" in err, err
    assert part_files(out)  # the finished parts stay, and pass verification
