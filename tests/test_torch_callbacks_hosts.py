# SPDX-License-Identifier: MIT
"""The training callbacks behave like their hosts: a Trainer with no sinks logs through its own
``report_to``; an unobservable model fails before the first step; no hook survives a run that
raises; bf16 runs are observed in the model's precision; packed batches keep their positions;
the direct API looks through DataParallel."""
import pathlib

import pytest

from conftest import need_extra

need_extra("torch", "hf")

import torch  # noqa: E402
import transformers  # noqa: E402

from pydepth import UnsupportedModuleError  # noqa: E402
from pydepth.torch import observe_residual_health  # noqa: E402
from pydepth.torch.callbacks import HealthMonitor, health_metrics  # noqa: E402

VOCAB = 50


def tiny_llama(seed=0, cls=transformers.LlamaForCausalLM):
    transformers.logging.set_verbosity_error()
    torch.manual_seed(seed)
    return cls(transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=32, intermediate_size=48, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64))


class FailingLlama(transformers.LlamaForCausalLM):
    """Raises in its ``fail_at``-th training forward."""

    fail_at = 3
    calls = 0

    def forward(self, input_ids=None, labels=None, attention_mask=None, **kwargs):
        if self.training:
            self.calls += 1
            if self.calls == self.fail_at:
                raise RuntimeError("injected failure in a training forward")
        return super().forward(input_ids=input_ids, labels=labels, attention_mask=attention_mask, **kwargs)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, tokens=12):
        self.ids = torch.randint(0, VOCAB, (n, tokens), generator=torch.Generator().manual_seed(3))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def trainer(tmp_path, model, callbacks, steps=4, data=None, **extra):
    need_extra("train")
    settings = dict(output_dir=str(tmp_path / "out"), max_steps=steps, per_device_train_batch_size=2,
                    learning_rate=1e-2, report_to=[], use_cpu=True, save_strategy="no", logging_strategy="no",
                    disable_tqdm=True, dataloader_num_workers=0, seed=0)
    settings.update(extra)
    return transformers.Trainer(model=model, args=transformers.TrainingArguments(**settings),
                                train_dataset=data if data is not None else Tokens(32), callbacks=callbacks)


def hooks_on(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
               for m in model.modules())


def read_tensorboard(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    out = {}
    for events in sorted(pathlib.Path(logdir).rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return out


def held():
    return {"input_ids": torch.randint(0, VOCAB, (2, 10), generator=torch.Generator().manual_seed(99))}


@pytest.mark.parametrize("mode", ["separate", "in-step"])
def test_a_trainer_with_report_to_tensorboard_and_no_sinks_writes_the_health_scalars_to_its_event_files(
        tmp_path, monkeypatch, mode):
    from pydepth.torch.callbacks import HealthTrainerCallback
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "tb"))
    callback = HealthTrainerCallback(every=2, mode=mode)
    run = trainer(tmp_path, tiny_llama(), [callback], report_to=["tensorboard"])
    run.train()
    scalars = read_tensorboard(tmp_path / "tb")
    prefix = "train/" + callback.monitor.prefix
    for name in ("activation_ratio_max", "adjoint_ratio_min", "block.1.after_feed_forward/adjoint_rms"):
        assert [s for s, _ in scalars[f"{prefix}/{name}"]] == [2, 4], name
    last = callback.monitor.last_metrics
    assert scalars[f"{prefix}/activation_ratio_max"][-1][1] == pytest.approx(last[f"{callback.monitor.prefix}/"
                                                                                  "activation_ratio_max"], rel=1e-6)
    assert [row["step"] for row in run.state.log_history if f"{callback.monitor.prefix}/out_of_band" in row] == [2, 4]


def test_an_in_place_compiled_model_fails_at_train_begin_before_the_first_step(tmp_path):
    from pydepth.torch.callbacks import HealthTrainerCallback
    model = tiny_llama()
    model.compile()
    steps = []

    class Count(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            steps.append(state.global_step)

    with pytest.raises(UnsupportedModuleError, match="compiled in place"):
        HealthTrainerCallback(every=1, model=model)
    run = trainer(tmp_path, model, [HealthTrainerCallback(every=3), Count()])
    with pytest.raises(UnsupportedModuleError, match="compiled in place"):
        run.train()
    assert steps == []


@pytest.mark.parametrize("settings", [dict(batch="step"), dict(mode="in-step"), dict(batch="held")])
def test_trainer_train_raising_mid_run_leaves_no_hook_on_the_model(tmp_path, settings):
    from pydepth.torch.callbacks import HealthTrainerCallback
    if settings.get("batch") == "held":
        settings = dict(batch=held())
    model = tiny_llama(cls=FailingLlama)
    callback = HealthTrainerCallback(every=1, sinks=[lambda metrics, step: None], **settings)
    run = trainer(tmp_path, model, [callback], steps=6)
    with pytest.raises(RuntimeError, match="injected failure"):
        run.train()
    assert run.state.global_step == 2 and callback.monitor.last_step == 2
    assert hooks_on(model) == 0


def test_a_bf16_trainer_is_observed_in_the_model_precision_outside_autocast(tmp_path):
    from pydepth.torch.callbacks import HealthTrainerCallback
    model = tiny_llama()
    batch = held()
    separate = HealthTrainerCallback(every=3, batch=batch, sinks=[lambda metrics, step: None])
    in_step = HealthTrainerCallback(every=3, mode="in-step", sinks=[lambda metrics, step: None])
    trainer(tmp_path, model, [separate, in_step], steps=3, bf16=True).train()
    record = separate.monitor.last_record
    assert (record.mode, record.autocast, record.precision) == ("separate", None, "float32")
    plain = tiny_llama()  # the trained weights in a model no mixed-precision wrapper has touched
    plain.load_state_dict(model.state_dict())
    expected = health_metrics(observe_residual_health(plain, batch["input_ids"]))
    got = separate.monitor.last_metrics
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-12), name
    assert (in_step.monitor.last_record.mode, in_step.monitor.last_record.autocast) == ("in-step", "bfloat16")


def test_packed_batches_are_observed_at_the_positions_they_were_trained_at():
    rows = [{"input_ids": list(range(3, 10))}, {"input_ids": list(range(20, 26))}]
    packed = transformers.DataCollatorWithFlattening(return_tensors="pt")(rows)
    assert packed["position_ids"].tolist()[0] == [*range(7), *range(6)]
    model = tiny_llama().eval()
    monitor = HealthMonitor(model, every=1)
    got = monitor.observe(packed, step=1)
    as_packed = observe_residual_health(model, packed["input_ids"], packed["labels"],
                                        position_ids=packed["position_ids"])
    one_sequence = observe_residual_health(model, packed["input_ids"], packed["labels"])
    assert got == health_metrics(as_packed)
    assert got["residual/activation_ratio_max"] != health_metrics(one_sequence)["residual/activation_ratio_max"]


def test_the_direct_api_observes_the_module_inside_data_parallel():
    model = tiny_llama()
    ids = held()["input_ids"]
    wrapped = observe_residual_health(torch.nn.DataParallel(model), ids)
    assert health_metrics(wrapped) == health_metrics(observe_residual_health(model, ids))


def lightning_run(tmp_path, decoder, callback, steps=4):
    need_extra("train")
    import lightning as L

    class Lit(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = decoder

        def training_step(self, batch, batch_idx):
            return self.model(**batch).loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    trainer = L.Trainer(accelerator="cpu", max_steps=steps, logger=False, callbacks=[callback],
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=str(tmp_path))
    trainer.fit(Lit(), torch.utils.data.DataLoader(Tokens(16), batch_size=2))
    return trainer


def test_lightning_checks_the_decoder_at_fit_start_and_observes_in_step(tmp_path):
    from pydepth.torch.callbacks import HealthLightningCallback
    compiled = tiny_llama()
    compiled.compile()
    seen = []
    refusing = HealthLightningCallback(every=1, sinks=[lambda metrics, step: seen.append(step)])
    with pytest.raises(UnsupportedModuleError, match="compiled in place"):
        lightning_run(tmp_path, compiled, refusing)
    assert seen == [] and hooks_on(compiled) == 0

    model = tiny_llama()
    in_step = HealthLightningCallback(every=2, mode="in-step", sinks=[lambda metrics, step: seen.append(step)])
    lightning_run(tmp_path, model, in_step)
    assert seen == [2, 4] and in_step.monitor.last_record.mode == "in-step"
    assert "residual_in_step/adjoint_ratio_max" in in_step.monitor.last_metrics
    assert hooks_on(model) == 0
