# SPDX-License-Identifier: MIT
"""HealthMonitor(mode="in-step"): residual health read from the training step's own forward and
backward equals a separate observation of the same batch with the same weights — in a plain
loop, with gradient accumulation, with a GradScaler-like loss scale and with a loss summed over
``num_items_in_batch`` — and the hooks live for one training forward only."""
import pytest

from conftest import need_extra

need_extra("torch", "hf")

import torch  # noqa: E402
import transformers  # noqa: E402

from pydepth import MissingAdjointError, MonitorSettingError  # noqa: E402
from pydepth.torch import observe_residual_health  # noqa: E402
from pydepth.torch.callbacks import HealthMonitor, health_metrics  # noqa: E402

VOCAB = 40
REL = 1e-12


def tiny_llama64(seed=0):
    transformers.logging.set_verbosity_error()
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=16, intermediate_size=24, num_attention_heads=2,
        num_key_value_heads=1, vocab_size=VOCAB, max_position_embeddings=32))
    return model.to(torch.float64).train()


def micro_batches(n, rows=2, tokens=9, seed=3):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (rows, tokens), generator=gen) for _ in range(n)]


def hooks_on(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def assert_same_values(got, expected, rel=REL):
    ours, theirs = health_metrics(got, prefix="x"), health_metrics(expected, prefix="x")
    assert sorted(ours) == sorted(theirs)
    for name, value in theirs.items():
        assert ours[name] == pytest.approx(value, rel=rel, abs=0.0), name


def run(objective, accumulation=1, steps=4, every=2, scale=1.0, **forward):
    """Trains with the monitor in-step; returns [(in-step report, separate report of the first
    micro-batch before the update)] for each observed step."""
    model = tiny_llama64()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    monitor = HealthMonitor(model, every=every, mode="in-step")
    batches = micro_batches(steps * accumulation)
    out = []
    for step in range(1, steps + 1):
        armed = monitor.begin_step()
        assert armed == (step % every == 0)
        group = batches[(step - 1) * accumulation: step * accumulation]
        for ids in group:
            objective(model(input_ids=ids, labels=ids, **forward).loss, accumulation).backward()
        assert hooks_on(model) == 0  # the step's first forward took every hook off
        expected = observe_residual_health(model, group[0]) if armed else None
        for p in model.parameters():  # what GradScaler.unscale_ does before the update
            p.grad.div_(scale)
        opt.step()
        opt.zero_grad(set_to_none=True)
        got = monitor.step()
        assert (got is None) == (not armed)
        if armed:
            out.append((monitor.last_report, expected, monitor.last_record))
    return out


def test_in_step_values_equal_a_separate_observation_in_a_plain_loop():
    seen = run(lambda loss, n: loss)
    assert len(seen) == 2
    for got, expected, record in seen:
        assert_same_values(got, expected)
        assert (record.mode, record.batch, record.loss_gradient, record.precision) == (
            "in-step", "micro-batch", 1.0, "float64")


def test_in_step_adjoints_are_the_micro_batch_mean_loss_under_gradient_accumulation():
    seen = run(lambda loss, n: loss / n, accumulation=4)
    for got, expected, record in seen:
        assert record.loss_gradient == 0.25
        assert_same_values(got, expected)


def test_in_step_adjoints_carry_only_the_loss_dtype_rounding_of_an_odd_accumulation_divisor():
    # transformers computes the loss in float32: the step's own adjoints carry float32(1/3)'s rounding
    seen = run(lambda loss, n: loss / n, accumulation=3)
    for got, expected, record in seen:
        assert record.loss_gradient == pytest.approx(1 / 3, rel=1e-7)
        assert_same_values(got, expected, rel=1e-6)


def test_in_step_adjoints_are_unscaled_under_a_grad_scaler_like_loss_scale():
    seen = run(lambda loss, n: (loss / n) * 65536.0, accumulation=2, scale=65536.0)
    for got, expected, record in seen:
        assert record.loss_gradient == 32768.0
        assert_same_values(got, expected)


def test_in_step_reads_a_loss_summed_over_num_items_in_batch_as_the_micro_batch_mean():
    seen = run(lambda loss, n: loss, accumulation=2, num_items_in_batch=8 * 16)
    for got, expected, record in seen:
        assert record.loss_factor == 8.0  # 128 items over 2x8 targets of this micro-batch
        assert_same_values(got, expected)


def test_in_step_metrics_are_named_for_their_mode():
    model = tiny_llama64()
    monitor = HealthMonitor(model, every=1, mode="in-step")
    monitor.begin_step()
    ids = micro_batches(1)[0]
    model(input_ids=ids, labels=ids).loss.backward()
    metrics = monitor.step()
    assert metrics and all(name.startswith("residual_in_step/") for name in metrics)


def test_in_step_skips_evaluation_forwards_and_captures_the_training_one():
    model = tiny_llama64()
    monitor = HealthMonitor(model, every=1, mode="in-step")
    monitor.begin_step()
    ids, other = micro_batches(2)
    model.eval()
    with torch.no_grad():
        model(input_ids=other, labels=other)
    assert hooks_on(model) > 0
    model.train()
    model(input_ids=ids, labels=ids).loss.backward()
    expected = observe_residual_health(model, ids)
    assert monitor.step() is not None
    assert_same_values(monitor.last_report, expected)


def test_in_step_without_a_backward_through_the_model_loss_is_refused_and_unhooked():
    model = tiny_llama64()
    monitor = HealthMonitor(model, every=1, mode="in-step")
    monitor.begin_step()
    ids = micro_batches(1)[0]
    model(input_ids=ids, labels=ids)
    with pytest.raises(MissingAdjointError, match=r"out\.loss"):
        monitor.step()
    assert hooks_on(model) == 0


def test_in_step_without_begin_step_names_it():
    model = tiny_llama64()
    monitor = HealthMonitor(model, every=1, mode="in-step")
    ids = micro_batches(1)[0]
    model(input_ids=ids, labels=ids).loss.backward()
    with pytest.raises(MonitorSettingError, match="begin_step"):
        monitor.step()


def test_in_step_refuses_a_held_batch_and_unknown_modes():
    model = tiny_llama64()
    with pytest.raises(MonitorSettingError, match="in-step"):
        HealthMonitor(model, batch={"input_ids": micro_batches(1)[0]}, mode="in-step")
    with pytest.raises(MonitorSettingError, match="mode must be one of"):
        HealthMonitor(model, mode="sideways")
