# SPDX-License-Identifier: MIT
"""HealthMonitor(mode="in-step"): residual health read from the training step's own forward and
backward equals a separate observation of the same batch with the same weights — in a plain
loop, with gradient accumulation, with a GradScaler-like loss scale and with a loss summed over
``num_items_in_batch`` — and the hooks live for one training forward only."""
import math

import numpy as np
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


def test_processes_is_checked_and_all_reduce_needs_in_step_and_a_process_group():
    model = tiny_llama64()
    with pytest.raises(MonitorSettingError, match=r"processes must be one of .* got 'everyone'"):
        HealthMonitor(model, mode="in-step", processes="everyone")
    with pytest.raises(MonitorSettingError, match="use mode='in-step'"):
        HealthMonitor(model, processes="all-reduce")
    monitor = HealthMonitor(model, every=1, mode="in-step", processes="all-reduce")
    assert monitor.begin_step()
    ids = micro_batches(1)[0]
    model(input_ids=ids, labels=ids).loss.backward()
    with pytest.raises(MonitorSettingError, match=r"initialized torch\.distributed default group"):
        monitor.step()
    assert hooks_on(model) == 0 and monitor.last_report is None


def _contract_rms(values, valid, scale=1.0):
    """numerics.md §9 written out independently: widen to float64 (times ``scale``, one rounding),
    keep the valid positions, one left-to-right sum of squares from +0.0, then sqrt(sum / n)."""
    x = values.detach().to(torch.float64).numpy()[valid].reshape(-1)
    if scale != 1.0:
        x = x * scale
    total = 0.0 + float(np.add.accumulate(x * x)[-1])
    return math.sqrt(total / float(x.size))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_in_step_rms_bits_equal_the_contracts_float64_sequential_sums_under_an_odd_divisor(dtype):
    model = tiny_llama64().to(dtype)
    layers = model.model.layers
    sites, grads, branches = {}, {}, {}

    def keep(site, t):
        sites[site] = t
        t.register_hook(lambda g: grads.__setitem__(site, g))

    hooks = [layers[0].register_forward_pre_hook(lambda m, a, k: keep(0, k.get("hidden_states", a[0] if a else None)),
                                                 with_kwargs=True)]
    for b, layer in enumerate(layers):
        hooks.append(layer.post_attention_layernorm.register_forward_pre_hook(
            lambda m, a, s=2 * b + 1: keep(s, a[0])))
        hooks.append(layer.register_forward_hook(lambda m, a, out, s=2 * b + 2: keep(s, out[0] if isinstance(
            out, tuple) else out)))
        hooks.append(layer.self_attn.register_forward_hook(
            lambda m, a, out, b=b: branches.__setitem__((b, 0), out[0].detach().clone())))
        hooks.append(layer.mlp.register_forward_hook(lambda m, a, out, b=b: branches.__setitem__((b, 1), out.detach())))
    monitor = HealthMonitor(model, every=1, mode="in-step")
    ids = micro_batches(1, rows=3, tokens=11)[0]
    assert monitor.begin_step()
    loss = model(input_ids=ids, labels=ids).loss
    seen = []
    loss.register_hook(seen.append)
    (loss / 3).backward()  # the loss gradient is 1/3 rounded in the loss's dtype: the unscale rounds
    for h in hooks:
        h.remove()
    monitor.step()
    report, record = monitor.last_report, monitor.last_record
    valid = np.ones(tuple(ids.shape), dtype=bool)
    valid[:, -1] = False  # Hugging Face's shift: the last position predicts nothing
    unscale = 1.0 / float(seen[0].to(torch.float64))
    assert record.loss_gradient == float(seen[0]) and unscale != 3.0
    got = [(r.activation_rms, r.adjoint_rms) for r in report.sites]
    want = [(_contract_rms(sites[s], valid), _contract_rms(grads[s], valid, unscale)) for s in range(len(sites))]
    assert np.array(got).view(np.uint64).tolist() == np.array(want).view(np.uint64).tolist()
    got_b = [(r.attention_output_rms, r.feed_forward_output_rms) for r in report.branches]
    want_b = [(_contract_rms(branches[(b, 0)], valid), _contract_rms(branches[(b, 1)], valid))
              for b in range(len(layers))]
    assert np.array(got_b).view(np.uint64).tolist() == np.array(want_b).view(np.uint64).tolist()
