# SPDX-License-Identifier: MIT
"""fork() while another thread runs a reverse pass: the child never inherits a lock held by a
thread it does not have (model locks, the buffer pool, the thread pool) and computes the same
bits as the parent."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")

STRESS = textwrap.dedent("""
    import os, sys, threading, time, signal
    import numpy as np
    import pydepth
    from pydepth import DecoderConfig, DecoderModel, SplitMix64
    pydepth.set_num_threads(int(sys.argv[1]))
    model = DecoderModel(DecoderConfig(64, 64, 4, 256, 4, 64), SplitMix64(1))
    T = 64
    tokens = (np.arange(4 * T).reshape(4, T) * 7) % 64
    reference = model.loss(tokens[:1], tokens[:1]).value
    stop = False

    def busy():  # reverse passes back to back: the model's lock is held most of the time
        while not stop:
            model.loss(tokens, tokens).backward()

    threading.Thread(target=busy, daemon=True).start()
    time.sleep(0.2)
    hung = wrong = 0
    for k in range(int(sys.argv[2])):
        time.sleep(0.011 * (k % 5))  # land at different points of the pass
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            loss = model.loss(tokens[:1], tokens[:1])
            loss.backward()
            os.write(w, np.float64(loss.value).tobytes())
            os._exit(0)
        os.close(w)
        deadline = time.monotonic() + 5
        while not os.waitpid(pid, os.WNOHANG)[0]:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                hung += 1
                break
            time.sleep(0.002)
        got = os.read(r, 8)
        os.close(r)
        wrong += got != np.float64(reference).tobytes() and len(got) == 8
    stop = True
    print("hung", hung, "wrong", wrong)
""")


@pytest.mark.parametrize("threads", [1, 2])
def test_children_forked_during_backward_finish_with_the_parents_bits(threads):
    proc = subprocess.run([sys.executable, "-P", "-c", STRESS, str(threads), "10"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["hung", "0", "wrong", "0"], proc.stdout + proc.stderr
