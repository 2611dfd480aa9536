# SPDX-License-Identifier: MIT
"""The training loop's non-observing steps run in one core call (DecoderModel.train_step) with
the bits of the five separate calls; Ctrl-C and SIGTERM keep their meaning: a signal in the
forward or reverse pass abandons the step with nothing changed, one in the update lets the step
finish and stops the loop after it; either way a resume equals the uninterrupted run."""
import pathlib
import signal

import numpy as np
import pytest

from pydepth import DecoderConfig, checkpoint
from pydepth._native import _testing
from pydepth.training import TrainSettings, resume_settings, run_training
from pydepth.training import run as run_module
from pydepth.training import step as step_module
from conftest import TINY_TRAIN

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEXT = (ROOT / "examples" / "data" / "corpus.txt").read_bytes()
SETTINGS = TrainSettings(steps=5, batch=2, tokens=12, seed=3, lr=1e-2, checkpoint_every=1)
#: A step of TINY_TRAIN polls for a signal before each block of its forward, before each block of
#: its reverse pass, then once more (the final poll) before its update.
POLLS = 2 * TINY_TRAIN["layers"] + 1
SIGNALS = [getattr(signal, n) for n in ("SIGINT", "SIGTERM") if hasattr(signal, n)]


def run(out, settings=SETTINGS, **kwargs):
    return run_training(settings, TEXT, out, config=DecoderConfig(**TINY_TRAIN), **kwargs)


def resume(out, at):
    ck = checkpoint.load(out / f"step-{at:06d}.safetensors")
    return run_training(resume_settings(ck), TEXT, out, resume=ck)


def checkpoints(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.glob("step-*.safetensors"))}


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """The uninterrupted run: a checkpoint after every step."""
    out = tmp_path_factory.mktemp("full")
    return run(out), checkpoints(out)


def five_calls(settings, upto):
    """The loop written as the five separate calls, from the state a fresh run starts in."""
    state = run_module._fresh(settings, DecoderConfig(**TINY_TRAIN), None)
    s, documents, losses = state.settings, step_module.byte_documents(TEXT), []
    while state.step < upto:
        batch = step_module.draw_batch(documents, state.rng, s.batch, s.tokens)
        state.optimizer.zero_grad()
        fwd = state.model.forward(batch, keep="training")
        loss = fwd.loss()
        loss.backward()
        losses.append(loss.item())
        fwd.release()
        state.optimizer.step()
        state.step += 1
    return state, losses


@pytest.fixture
def signal_in_call(monkeypatch):
    """signal_in_call(n, signum, poll): the n-th step of the loop gets signum at that poll (see
    _testing.signal_at_poll); the probe is removed afterwards whether it fired or not."""
    def arm(n, signum, poll):
        real, calls = step_module.train_step, []

        def step(*args, **kwargs):
            calls.append(1)
            if len(calls) == n:
                _testing.signal_at_poll(signum, poll)
            return real(*args, **kwargs)
        monkeypatch.setattr(step_module, "train_step", step)
    yield arm
    fired = not _testing.signal_pending_at_poll()
    _testing.signal_at_poll(0)
    assert fired, "the armed signal was never raised"


def test_the_loop_steps_in_one_core_call_with_the_losses_checkpoints_and_parameters_of_the_five_calls(full, tmp_path):
    result, saved = full
    assert result.model._plan.planned  # the one-call step's graph, kept between steps
    state, losses = five_calls(SETTINGS, SETTINGS.steps)
    assert np.array(result.losses).view(np.uint64).tolist() == np.array(losses).view(np.uint64).tolist()
    for p, q in zip(result.model.parameters, state.model.parameters):
        assert np.array_equal(p.value.view(np.uint64), q.value.view(np.uint64)), p.name
    assert result.optimizer.state_dict()["step"] == state.optimizer.step_count == SETTINGS.steps
    extra = checkpoint.load(result.checkpoint).extra
    checkpoint.save(tmp_path / "five.safetensors", state.model, optimizer=state.optimizer, rng=state.rng,
                    record=state.record, step=state.step, extra=extra)
    assert (tmp_path / "five.safetensors").read_bytes() == saved[result.checkpoint.name]


@pytest.mark.parametrize("signum", SIGNALS)
def test_a_signal_in_the_update_of_a_one_call_step_lets_it_finish_and_stops_the_loop_after_it(
        full, tmp_path, signal_in_call, signum):
    signal_in_call(3, signum, 0)  # just after the third step's final poll: pending through its update
    result = run(tmp_path)
    assert result.interrupted and result.stop_signal == signum
    assert result.step == 3 == result.optimizer.step_count and len(result.losses) == 3
    assert checkpoints(tmp_path) == {k: v for k, v in full[1].items() if k <= "step-000003.safetensors"}
    done = resume(tmp_path, 3)
    assert done.step == SETTINGS.steps and not done.interrupted
    assert checkpoints(tmp_path) == full[1]
    assert result.losses + done.losses == full[0].losses


@pytest.mark.parametrize("poll", [1, TINY_TRAIN["layers"] + 1, POLLS], ids=["forward", "reverse", "final-poll"])
def test_a_signal_in_the_passes_of_a_one_call_step_abandons_it_with_nothing_changed_and_resume_is_exact(
        full, tmp_path, signal_in_call, poll):
    signal_in_call(3, signal.SIGINT, poll)
    result = run(tmp_path)
    assert result.interrupted and result.stop_signal == signal.SIGINT
    assert result.step == 2 == result.optimizer.step_count and len(result.losses) == 2
    assert checkpoints(tmp_path) == {k: v for k, v in full[1].items() if k <= "step-000002.safetensors"}
    at_two = checkpoint.load(tmp_path / "step-000002.safetensors")
    assert result.rng == at_two.rng  # the abandoned step's batch is drawn again by the resume
    for p, q in zip(result.model.parameters, at_two.model.parameters):
        assert np.array_equal(p.value.view(np.uint64), q.value.view(np.uint64)), p.name
    done = resume(tmp_path, 2)
    assert checkpoints(tmp_path) == full[1]
    assert result.losses + done.losses == full[0].losses


def test_a_refused_step_raises_from_the_loop_what_the_five_calls_raise(tmp_path):
    settings = TrainSettings(steps=4, batch=2, tokens=12, seed=3, lr=1e300, weight_decay=0.0)
    with pytest.raises(Exception) as separate:
        five_calls(settings, settings.steps)
    with pytest.raises(Exception) as loop:
        run(tmp_path, settings)
    assert type(loop.value) is type(separate.value) and str(loop.value) == str(separate.value)
    assert not list(tmp_path.glob("step-*.safetensors"))


def test_train_step_keeps_an_optimizer_whose_step_is_its_own_or_whose_parameters_are_another_models():
    from pydepth import DecoderModel, SplitMix64
    from pydepth.optim import SGD

    class Counting(SGD):
        steps = 0

        def step(self) -> None:
            type(self).steps += 1
            super().step()

    config = DecoderConfig(**TINY_TRAIN)
    batch = step_module.draw_batch(step_module.byte_documents(TEXT), SplitMix64(5), 2, 12)
    model, twin = DecoderModel(config, SplitMix64(1)), DecoderModel(config, SplitMix64(1))
    counting = Counting(model.parameters, lr=1e-2)
    step_module.train_step(model, counting, batch)
    assert Counting.steps == 1  # the subclass's own step ran, not the core's update in its place
    foreign = SGD(twin.parameters, lr=1e-2)  # updates twin from twin's gradients; model's are computed
    loss, _ = step_module.train_step(model, foreign, batch)
    assert np.isfinite(loss) and foreign.step_count == 1
    plain = DecoderModel(config, SplitMix64(1))
    mine = SGD(plain.parameters, lr=1e-2)
    step_module.train_step(plain, mine, batch)  # one SGD update, through the one core call
    for p, q in zip(model.parameters, plain.parameters):
        assert np.array_equal(p.value.view(np.uint64), q.value.view(np.uint64)), p.name
