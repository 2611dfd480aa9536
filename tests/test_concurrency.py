# SPDX-License-Identifier: MIT
"""Concurrent callers of one graph or one model, fork after the thread pool ran, and interpreter
exit while C work runs (issue 11, items 2 and 3)."""
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import pydepth
from pydepth import DecoderConfig, DecoderModel, GraphReleasedError, SplitMix64

CFG = DecoderConfig(500, 64, 4, 128, 6, 64)
IDS = (np.arange(4 * 65) * 7919 % 500).reshape(4, 65)
X, Y = IDS[:, :-1], IDS[:, 1:]


def bits(a):
    return np.ascontiguousarray(a).view(np.uint64)


@pytest.fixture(scope="module")
def model():
    return DecoderModel(CFG, SplitMix64(11))


def grads(m):
    return [bits(p.grad).copy() for p in m.parameters]


def test_release_during_backward_waits_for_the_c_call(model):
    """release() from another thread while backward runs: the free waits for the pass."""
    model.zero_grad()
    model.loss(X, Y).backward()
    want = grads(model)
    for _ in range(3):
        model.zero_grad()
        fwd = model.forward(X)
        loss = fwd.loss(Y)
        errors = []
        started = threading.Event()

        def run(loss=loss, errors=errors, started=started):
            started.set()
            try:
                loss.backward()
            except Exception as err:  # a GraphReleasedError is fine if release won the race
                errors.append(err)

        t = threading.Thread(target=run)
        t.start()
        started.wait()
        time.sleep(0.005)
        fwd.release()
        t.join()
        assert all(isinstance(e, GraphReleasedError) for e in errors), errors
        if not errors:
            assert all(np.array_equal(a, b) for a, b in zip(grads(model), want))
        with pytest.raises(GraphReleasedError):
            _ = fwd.per_target_nll
        with pytest.raises(GraphReleasedError):
            loss.backward()


def test_release_during_loss_attach_waits_for_the_c_call(model):
    for _ in range(5):
        fwd = model.forward(X)
        out = []
        t = threading.Thread(target=lambda fwd=fwd, out=out: out.append(fwd.loss(Y)))
        t.start()
        fwd.release()
        t.join()
        with pytest.raises(GraphReleasedError):
            _ = fwd.per_target_nll


def test_concurrent_loss_attach_attaches_once(model):
    fwd = model.forward(X)
    ok, refused = [], []

    def attach():
        try:
            ok.append(fwd.loss(Y))
        except pydepth.AutodiffError as err:
            refused.append(err)

    threads = [threading.Thread(target=attach) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 1 and len(refused) == 3


def test_concurrent_backward_on_one_model_equals_the_serial_sum():
    """4 threads x 12 identical graphs: every gradient commit is serialized per model, and the
    adjoints are identical, so the sum is the serial one bit for bit."""
    m = DecoderModel(DecoderConfig(20000, 64, 2, 64, 1, 4), SplitMix64(5))  # commit-heavy
    x = (np.arange(1 * 3) * 31 % 20000).reshape(1, 3)
    losses = [m.loss(x[:, :-1], x[:, 1:]) for _ in range(48)]
    for loss in losses:
        loss.backward()
    want = grads(m)
    m.zero_grad()
    barrier = threading.Barrier(4)

    def work(k):
        barrier.wait()
        for loss in losses[k::4]:
            loss.backward()

    old = pydepth.get_num_threads()
    pydepth.set_num_threads(1)  # every commit runs inline on its caller: the widest race
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        pydepth.set_num_threads(old)
    got = grads(m)
    differing = sum(int(np.count_nonzero(a != b)) for a, b in zip(got, want))
    assert differing == 0


def _run(code, **kw):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, **kw)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_fork_after_the_pool_ran(tmp_path):
    code = """
        import os, numpy as np, pydepth as pd
        pd.set_num_threads(2)
        m = pd.DecoderModel(pd.DecoderConfig(300, 32, 4, 48, 2, 32), pd.SplitMix64(3))
        x = (np.arange(2 * 33) * 31 % 300).reshape(2, 33)
        ref = m.loss(x[:, :-1], x[:, 1:]).item()
        pid = os.fork()
        if pid == 0:
            ok = m.loss(x[:, :-1], x[:, 1:]).item() == ref
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert m.loss(x[:, :-1], x[:, 1:]).item() == ref
        print("ok")
    """
    out = _run(code, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_interpreter_exit_while_a_daemon_thread_computes(tmp_path):
    code = """
        import threading, time, numpy as np, pydepth as pd
        m = pd.DecoderModel(pd.DecoderConfig(500, 64, 4, 128, 8, 128), pd.SplitMix64(3))
        x = (np.arange(4 * 128) * 31 % 500).reshape(4, 128)
        def work():
            while True:
                m.loss(x, x).backward()
        for _ in range(2):
            threading.Thread(target=work, daemon=True).start()
        time.sleep(0.3)
        print("exiting")
    """
    out = _run(code, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "exiting", out.stderr



def _update_during_backward(update):
    """Starts update(model) in a second thread ~5 ms into this thread's reverse pass (~30 ms);
    returns the model, what finished and whether the backward was refused as stale."""
    m = DecoderModel(CFG, SplitMix64(11))
    loss = m.loss(X, Y)
    order = []
    started = threading.Event()

    def other():
        started.wait()
        time.sleep(0.005)
        update(m)
        order.append("update")

    t = threading.Thread(target=other)
    t.start()
    old = pydepth.get_num_threads()
    pydepth.set_num_threads(1)
    try:
        started.set()
        try:
            loss.backward()
        except pydepth.StaleOperandError:
            return m, order, True  # the update won the race to the lock: a typed refusal
        order.append("backward")
    finally:
        pydepth.set_num_threads(old)
        t.join()
    return m, order, False


@pytest.mark.parametrize("update", [
    pytest.param(lambda m: pydepth.optim.SGD(m.parameters, lr=0.5, weight_decay=0.5).step(), id="optimizer_step"),
    pytest.param(lambda m: m.load_state_dict({p.name: p.value + 1.0 for p in m.parameters}),
                 id="load_state_dict"),
    pytest.param(lambda m: m.parameters[1].assign(m.parameters[1].value + 1.0), id="assign"),
])
def test_parameter_updates_wait_for_a_running_backward_on_the_same_model(update):
    """An update started while a reverse pass of the same model runs waits for it: the gradients
    are those of the values the forward saw, bit for bit (an update in the middle changes the
    values later steps of the pass read), and the update still lands."""
    ref = DecoderModel(CFG, SplitMix64(11))
    ref.loss(X, Y).backward()
    want = grads(ref)
    finished = 0
    for _ in range(3):
        m, order, stale = _update_during_backward(update)
        if stale:
            continue
        finished += 1
        assert "update" in order  # it landed
        assert all(np.array_equal(a, b) for a, b in zip(grads(m), want))
    assert finished >= 1
