# SPDX-License-Identifier: MIT
"""Optimizer steps from several threads: every result equals some serial order of the same calls
(docs/numerics-concurrency.md, C7). Small models, many trials, seconds in total."""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from pydepth import DecoderConfig, DecoderModel, SplitMix64, no_grad
from pydepth.optim import SGD, AdamW

CFG = DecoderConfig(64, 16, 2, 32, 2, 8)
IDS = (np.arange(2 * 9) * 7919 % 64).reshape(2, 9)
X, Y = IDS[:, :-1], IDS[:, 1:]
TRIALS = 100
OPTIMIZERS = {"adamw": lambda ps: AdamW(ps, lr=1e-2), "sgd": lambda ps: SGD(ps, lr=1e-2, momentum=0.9)}


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64).copy()


def fresh(kind):
    """A model with accumulated gradients and a fresh optimizer over it."""
    model = DecoderModel(CFG, SplitMix64(5))
    model.loss(X, Y).backward()
    return model, OPTIMIZERS[kind](model.parameters)


def snapshot(model, opt):
    """Every parameter and slot as bit patterns, and the step count."""
    out = {p.name: bits(p.value) for p in model.parameters}
    out.update({f"{p.name}.{s}": bits(opt.slot(p.name, s)) for p in model.parameters for s in opt.slot_names})
    out["step"] = opt.step_count
    return out


def same(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def run_together(*calls):
    """Starts every call on its own thread at one barrier and joins them; re-raises any error."""
    barrier = threading.Barrier(len(calls))
    errors = []

    def run(call):
        barrier.wait()
        try:
            call()
        except BaseException as err:  # reported to the test thread
            errors.append(err)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def loss_now(model):
    with no_grad():
        return bits(model.loss(X, Y).item())


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_two_threads_stepping_one_optimizer_equal_two_serial_steps(kind):
    model, opt = fresh(kind)
    opt.step()
    opt.step()
    want = snapshot(model, opt)
    torn = 0
    for _ in range(TRIALS):
        model, opt = fresh(kind)
        run_together(opt.step, opt.step)
        torn += not same(snapshot(model, opt), want)
    assert torn == 0, f"{torn} of {TRIALS} trials match no serial order of two steps"


def test_a_forward_during_a_step_sees_the_weights_before_or_after_it():
    model, opt = fresh("adamw")
    allowed = {bits(model.loss(X, Y).item()).tobytes()}
    opt.step()
    allowed.add(loss_now(model).tobytes())
    seen = []
    for _ in range(TRIALS):
        model, opt = fresh("adamw")
        run_together(opt.step, lambda m=model: seen.extend(loss_now(m).tobytes() for _ in range(3)))
    torn = sum(s not in allowed for s in seen)
    assert torn == 0, f"{torn} of {len(seen)} losses read half-updated weights"


def test_state_dict_during_steps_is_the_state_after_some_whole_step():
    _, opt = fresh("adamw")
    serial = [opt.state_dict()]
    for _ in range(3):
        opt.step()
        serial.append(opt.state_dict())
    taken = []
    for _ in range(TRIALS // 4):
        _, opt = fresh("adamw")
        run_together(lambda o=opt: [o.step() for _ in range(3)],
                      lambda o=opt: taken.extend(o.state_dict() for _ in range(3)))
    for state in taken:
        want = serial[state["step"]]
        for name, slots in state["slots"].items():
            for s, a in slots.items():
                assert np.array_equal(bits(a), bits(want["slots"][name][s])), (state["step"], name, s)


def test_zero_grad_and_load_state_dict_during_a_step_take_effect_before_or_after_it():
    model, opt = fresh("sgd")
    start = opt.state_dict()
    opt.step()
    one_step = bits(opt.slot(model.parameters[0].name, "momentum_buffer"))
    orders = []
    for first_zero in (True, False):  # the two serial orders of (zero_grad, step)
        model, opt = fresh("sgd")
        calls = [opt.zero_grad, opt.step] if first_zero else [opt.step, opt.zero_grad]
        for c in calls:
            c()
        orders.append(snapshot(model, opt))
    for _ in range(TRIALS // 4):
        model, opt = fresh("sgd")
        run_together(opt.step, opt.zero_grad)
        got = snapshot(model, opt)
        assert any(same(got, o) for o in orders)
        model, opt = fresh("sgd")
        run_together(opt.step, lambda o=opt: o.load_state_dict(start))
        # load then step (count 1, the slots of one step) or step then load (count 0, zeros)
        slot = bits(opt.slot(model.parameters[0].name, "momentum_buffer"))
        assert (opt.step_count, slot.tobytes()) in ((1, one_step.tobytes()), (0, bits(np.zeros_like(slot)).tobytes()))


FORK_DURING_STEPS = textwrap.dedent("""
    import os, signal, threading, time
    import numpy as np
    from pydepth import DecoderConfig, DecoderModel, SplitMix64
    from pydepth.optim import AdamW
    model = DecoderModel(DecoderConfig(64, 32, 2, 64, 2, 16), SplitMix64(1))
    ids = np.arange(16).reshape(1, 16)
    model.loss(ids, ids).backward()
    opt = AdamW(model.parameters, lr=1e-3)
    stop = False

    def busy():  # steps back to back: the optimizer's turn and the model lock are held most of the time
        while not stop:
            opt.step()

    threading.Thread(target=busy, daemon=True).start()
    hung = torn = 0
    for k in range(10):
        time.sleep(0.003 * (k % 4))
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            before = opt.state_dict()["step"]
            opt.step()
            os.write(w, bytes([opt.step_count - before]))
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
        torn += os.read(r, 1) not in (b"\\x01", b"")
        os.close(r)
    stop = True
    print("hung", hung, "torn", torn)
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
def test_a_child_forked_while_another_thread_steps_can_step_its_own_copy():
    out = subprocess.run([sys.executable, "-P", "-c", FORK_DURING_STEPS], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["hung", "0", "torn", "0"]
