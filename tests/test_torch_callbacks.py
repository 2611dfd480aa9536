# SPDX-License-Identifier: MIT
"""pydepth.torch.callbacks: residual health watched while training. A plain-loop HealthMonitor, a
transformers TrainerCallback and a Lightning Callback observe every N steps, flatten the report
into metrics, hand them to TensorBoard, W&B (offline), MLflow (local file store) and JSON lines,
which are read back; wrapped models are looked through, and training is left bit-identical."""
import json
import math
import os
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the callbacks need the 'torch' extra")
transformers = pytest.importorskip("transformers", reason="tiny Llama models need the 'hf' extra")

from conftest import wandb_history  # noqa: E402
from pydepth import ArgumentTypeError, MonitorSettingError, UnsupportedModuleError  # noqa: E402
from pydepth.health import RatioBand  # noqa: E402
from pydepth.torch import observe_residual_health  # noqa: E402
from pydepth.torch.callbacks import (SUMMARY_METRICS, HealthMonitor, JsonLinesSink,  # noqa: E402
                                     MlflowSink, TensorBoardSink, WandbSink, health_metrics,
                                     unwrap_model)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
VOCAB = 50
HERE = pathlib.Path(__file__).resolve().parent


def tiny_llama(seed=0, layers=2, dropout=0.0):
    """A randomly initialized float32 Llama built from a config (nothing downloaded)."""
    transformers.logging.set_verbosity_error()
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=layers, hidden_size=32, intermediate_size=48, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64, attention_dropout=dropout))


def token_batches(n, rows=2, tokens=12, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (rows, tokens), generator=gen) for _ in range(n)]


def held_batch():
    return {"input_ids": token_batches(1, rows=2, tokens=10, seed=99)[0]}


def train_plain(model, batches, monitor=None, between=None):
    """SGD on the batches; ``between(step)`` runs after backward, before the update."""
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model.train()
    for i, ids in enumerate(batches, 1):
        model(input_ids=ids, labels=ids).loss.backward()
        if between is not None:
            between(i)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if monitor is not None:
            monitor.step({"input_ids": ids})


def read_tensorboard(logdir):
    """{tag: [(step, value)]} of every scalar in the event files under ``logdir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    out = {}
    for events in sorted(pathlib.Path(logdir).rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return out


def read_json_lines(path):
    return [json.loads(line) for line in pathlib.Path(path).read_text().splitlines()]


# ---- metrics ------------------------------------------------------------------------------------

def test_metrics_flatten_a_report_into_summaries_and_every_sites_values():
    model = tiny_llama()
    report = observe_residual_health(model, held_batch()["input_ids"])
    metrics = health_metrics(report)
    assert all(type(v) is float for v in metrics.values())
    assert {f"residual/{m}" for m in SUMMARY_METRICS} <= set(metrics)
    assert metrics["residual/activation_ratio_max"] == max(r.activation_ratio for r in report.sites)
    assert metrics["residual/adjoint_ratio_min"] == min(r.adjoint_ratio for r in report.sites)
    assert metrics["residual/valid_positions"] == report.valid_positions
    assert len(report.sites) == 5
    for r in report.sites:
        assert metrics[f"residual/{r.label}/activation_ratio"] == r.activation_ratio
        assert metrics[f"residual/{r.label}/adjoint_rms"] == r.adjoint_rms
    assert len(metrics) == len(SUMMARY_METRICS) + 4 * len(report.sites)
    assert set(health_metrics(report, prefix="health", per_site=False)) == {f"health/{m}" for m in SUMMARY_METRICS}


def test_every_site_field_declared_a_metric_is_logged_per_site_under_its_declared_name():
    from pydepth._fields import column_name, declared
    from pydepth.health import ResidualHealthRow
    report = observe_residual_health(tiny_llama(), held_batch()["input_ids"])
    metrics = health_metrics(report)
    wanted = [(column_name(n, q), n) for n, q in declared(ResidualHealthRow) if q.metric]
    assert wanted and [m for m, _ in wanted] == ["activation_ratio", "adjoint_ratio", "activation_rms", "adjoint_rms"]
    for r in report.sites:
        for metric, name in wanted:
            assert struct.pack("<d", metrics[f"residual/{r.label}/{metric}"]) == struct.pack("<d", getattr(r, name))
    per_site = {k for k in metrics if k.count("/") == 2}
    assert per_site == {f"residual/{r.label}/{m}" for r in report.sites for m, _ in wanted}


def test_out_of_band_counts_each_activation_and_adjoint_ratio_outside_the_band():
    model = tiny_llama()
    ids = held_batch()["input_ids"]
    assert health_metrics(observe_residual_health(model, ids))["residual/out_of_band"] == 0.0
    narrow = observe_residual_health(model, ids, band=(0.999, 1.001))
    expected = sum((r.activation_status is not RatioBand.WITHIN) + (r.adjoint_status is not RatioBand.WITHIN)
                   for r in narrow.sites)
    assert 0 < expected < 2 * len(narrow.sites)  # site 0 and the last adjoint are 1 by definition
    assert health_metrics(narrow)["residual/out_of_band"] == expected


# ---- plain loop ---------------------------------------------------------------------------------

def test_a_monitor_observes_every_n_steps_and_logs_what_a_direct_observation_gives(tmp_path):
    model = tiny_llama()
    held = held_batch()
    monitor = HealthMonitor(model, every=3, batch=held, sinks=[JsonLinesSink(tmp_path / "h.jsonl")])
    train_plain(model, token_batches(7), monitor)
    monitor.close()
    rows = read_json_lines(tmp_path / "h.jsonl")
    assert [r["step"] for r in rows] == [3, 6]
    assert rows[-1] != rows[0]  # the model changed between observations
    assert monitor.last_step == 6 and monitor.last_metrics == {k: v for k, v in rows[-1].items() if k != "step"}
    assert health_metrics(observe_residual_health(model, held["input_ids"])) != monitor.last_metrics  # step 7
    # an independent run stopped after step 6 observes what the monitor logged there
    model6 = tiny_llama()
    train_plain(model6, token_batches(7)[:6])
    expected = health_metrics(observe_residual_health(model6, held["input_ids"]))
    assert {k: v for k, v in rows[-1].items() if k != "step"} == expected


def test_step_mode_observes_the_batch_it_was_given_and_refuses_to_observe_nothing(tmp_path):
    model = tiny_llama()
    seen = []
    monitor = HealthMonitor(model, every=2, sinks=lambda metrics, step: seen.append((step, metrics)))
    batches = token_batches(4)
    assert monitor.step({"input_ids": batches[0]}) is None
    logged = monitor.step({"input_ids": batches[1], "labels": batches[1]})
    assert seen == [(2, logged)]
    assert logged == health_metrics(observe_residual_health(model, batches[1], batches[1]))
    monitor.step()
    with pytest.raises(MonitorSettingError, match="step 4 is due for observation but no batch was given"):
        monitor.step()
    assert len(seen) == 1


def test_observing_leaves_grads_modes_hooks_and_the_whole_training_run_bit_identical():
    batches = token_batches(6)
    plain = tiny_llama(dropout=0.2)
    torch.manual_seed(5)
    train_plain(plain, batches)

    watched = tiny_llama(dropout=0.2)
    monitor = HealthMonitor(watched, every=1, batch=held_batch())
    hooks_before = [(len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks))
                    for m in watched.modules()]

    def observe_mid_step(step):
        grads = {n: p.grad.clone() for n, p in watched.named_parameters()}
        assert monitor.step(step=step) is not None
        assert all(torch.equal(p.grad, grads[n]) for n, p in watched.named_parameters())
        assert all(m.training for m in watched.modules())
        assert [(len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks))
                for m in watched.modules()] == hooks_before

    torch.manual_seed(5)
    train_plain(watched, batches, between=observe_mid_step)
    assert monitor.last_step == 6
    for (name, a), b in zip(plain.state_dict().items(), watched.state_dict().values()):
        assert torch.equal(a, b), name  # dropout draws and updates unchanged by observing


def test_wrapped_models_are_observed_through_data_parallel_and_torch_compile():
    model = tiny_llama()
    ids = held_batch()["input_ids"]
    direct = health_metrics(observe_residual_health(model, ids))
    compiled = torch.compile(model)
    for wrapped in (torch.nn.DataParallel(model), compiled, torch.nn.DataParallel(compiled)):
        assert unwrap_model(wrapped) is model
        assert HealthMonitor(wrapped, every=1, batch=ids).step() == direct
    with pytest.raises(UnsupportedModuleError):  # the bridge itself still refuses a compiled module
        observe_residual_health(compiled, ids)


def test_bad_settings_are_refused_with_typed_errors_naming_the_value():
    model = tiny_llama()
    with pytest.raises(MonitorSettingError, match="every must be at least 1 step, got 0"):
        HealthMonitor(model, every=0)
    with pytest.raises(ArgumentTypeError, match="every must be an integer number of steps, got '5'"):
        HealthMonitor(model, every="5")
    with pytest.raises(MonitorSettingError, match="batch must be 'step' or a held batch, got 'held'"):
        HealthMonitor(model, batch="held")
    with pytest.raises(ArgumentTypeError, match="a batch mapping needs 'input_ids'; got keys"):
        HealthMonitor(model, batch={"ids": torch.zeros(1, 3, dtype=torch.long)})
    with pytest.raises(ArgumentTypeError, match="a sink needs write"):
        HealthMonitor(model, sinks=[42])
    with pytest.raises(ArgumentTypeError, match=r"model must be a torch\.nn\.Module, got dict"):
        HealthMonitor({}, every=1)
    with pytest.raises(ArgumentTypeError, match="writer must have add_scalar"):
        TensorBoardSink(object())


# ---- sinks read back ----------------------------------------------------------------------------

def test_tensorboard_sink_writes_scalars_an_event_accumulator_reads_back(tmp_path):
    pytest.importorskip("tensorboard", reason="the TensorBoard sink needs tensorboard")
    from torch.utils.tensorboard import SummaryWriter
    model = tiny_llama()
    writer = SummaryWriter(str(tmp_path))
    monitor = HealthMonitor(model, every=2, batch=held_batch(), sinks=[TensorBoardSink(writer)])
    logged = {}
    for step in range(1, 5):
        metrics = monitor.step()
        if metrics:
            logged[step] = metrics
    writer.close()
    scalars = read_tensorboard(tmp_path)
    assert set(scalars) == set(logged[2])
    for tag, points in scalars.items():
        assert [s for s, _ in points] == [2, 4]
        for step, value in points:  # event files hold float32
            assert value == pytest.approx(logged[step][tag], rel=1e-6), tag


def test_wandb_sink_logs_offline_runs_whose_history_reads_back(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb", reason="the W&B sink needs wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    model = tiny_llama()
    run = wandb.init(project="pydepth-tests", dir=str(tmp_path), mode="offline")
    try:
        monitor = HealthMonitor(model, every=2, batch=held_batch(), sinks=[WandbSink(run)])
        logged = {s: m for s in range(1, 5) for m in [monitor.step()] if m}
    finally:
        run.finish()
    rows = wandb_history(tmp_path)
    assert [r["_step"] for r in rows] == [2, 4], [sorted(r)[:8] for r in rows]
    for row in rows:
        assert {k: v for k, v in row.items() if not k.startswith("_")} == logged[row["_step"]]


def test_mlflow_sink_logs_into_a_local_file_store_that_reads_back(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow", reason="the MLflow sink needs mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    store = (tmp_path / "mlruns").as_uri()  # a new directory: the file store creates its default experiment
    mlflow.set_tracking_uri(store)
    model = tiny_llama()
    try:
        with mlflow.start_run() as run:
            monitor = HealthMonitor(model, every=2, batch=held_batch(), sinks=[MlflowSink()])
            logged = {s: m for s in range(1, 5) for m in [monitor.step()] if m}
        other = mlflow.start_run()
        mlflow.end_run()
        HealthMonitor(model, every=1, batch=held_batch(), sinks=[MlflowSink(other.info.run_id)]).step()
    finally:
        mlflow.set_tracking_uri(None)
    client = mlflow.tracking.MlflowClient(tracking_uri=store)
    for key in logged[2]:
        history = client.get_metric_history(run.info.run_id, key)
        assert [(m.step, m.value) for m in history] == [(s, logged[s][key]) for s in (2, 4)], key
    assert [m.step for m in client.get_metric_history(other.info.run_id, "residual/out_of_band")] == [1]


def test_json_lines_sink_appends_one_flushed_object_per_observation(tmp_path):
    path = tmp_path / "health.jsonl"
    sink = JsonLinesSink(path)
    sink.write({"residual/a": 0.25, "residual/b": float("inf")}, 3)
    assert read_json_lines(path) == [{"step": 3, "residual/a": 0.25, "residual/b": "inf"}]  # flushed
    sink.write({"residual/a": 0.5}, 6)
    sink.close()
    JsonLinesSink(path).write({"residual/a": 1.0}, 9)  # appends to what is there
    assert [r["step"] for r in read_json_lines(path)] == [3, 6, 9]


# ---- transformers.Trainer -----------------------------------------------------------------------

class _TokenDataset(torch.utils.data.Dataset):
    def __init__(self, n, tokens=12):
        gen = torch.Generator().manual_seed(3)
        self.ids = torch.randint(0, VOCAB, (n, tokens), generator=gen)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i], "attention_mask": torch.ones_like(self.ids[i])}


def _run_trainer(tmp_path, callbacks):
    pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate")
    model = tiny_llama()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=20, per_device_train_batch_size=2, learning_rate=1e-2,
        report_to=[], use_cpu=True, save_strategy="no", logging_strategy="no", disable_tqdm=True,
        dataloader_num_workers=0, seed=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_TokenDataset(64), callbacks=callbacks)
    trainer.train()
    return model


def test_a_20_step_trainer_run_writes_residual_metrics_to_tensorboard_and_trains_unchanged(tmp_path):
    pytest.importorskip("tensorboard", reason="the TensorBoard sink needs tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    from pydepth.torch.callbacks import HealthTrainerCallback
    held = held_batch()
    writer = SummaryWriter(str(tmp_path / "tb"))
    on_held = HealthTrainerCallback(every=5, batch=held, sinks=[TensorBoardSink(writer)])
    on_step = HealthTrainerCallback(every=10, sinks=[JsonLinesSink(tmp_path / "step.jsonl")], per_site=False)
    model = _run_trainer(tmp_path, [on_held, on_step])
    writer.close()

    scalars = read_tensorboard(tmp_path / "tb")
    assert len(scalars) == len(SUMMARY_METRICS) + 4 * 5
    for tag in ("residual/activation_ratio_max", "residual/adjoint_ratio_max", "residual/out_of_band",
                "residual/block.1.after_feed_forward/activation_ratio"):
        assert [s for s, _ in scalars[tag]] == [5, 10, 15, 20], tag
    final = health_metrics(observe_residual_health(model, held["input_ids"]))
    for tag, points in scalars.items():
        assert points[-1][1] == pytest.approx(final[tag], rel=1e-6), tag
    assert len({v for _, v in scalars["residual/activation_ratio_max"]}) == 4  # training moved it

    rows = read_json_lines(tmp_path / "step.jsonl")
    assert [r["step"] for r in rows] == [10, 20]
    assert rows[-1]["residual/valid_positions"] == 2 * (12 - 1)  # a training batch: 2 rows of 12
    assert not any(math.isnan(v) for r in rows for v in r.values())
    assert all(len(m._forward_pre_hooks) == 0 for m in model.modules())  # the recording hook is gone

    unwatched = _run_trainer(tmp_path, [])
    for (name, a), b in zip(unwatched.state_dict().items(), model.state_dict().values()):
        assert torch.equal(a, b), name


# ---- Lightning ----------------------------------------------------------------------------------

def test_a_20_step_lightning_run_logs_residual_metrics_through_its_tensorboard_logger(tmp_path):
    pytest.importorskip("tensorboard", reason="Lightning's TensorBoardLogger needs tensorboard")
    L = pytest.importorskip("lightning", reason="the Lightning callback needs lightning")
    from lightning.pytorch.loggers import TensorBoardLogger

    from pydepth.torch.callbacks import HealthLightningCallback

    class LitDecoder(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = tiny_llama()

        def training_step(self, batch, batch_idx):
            return self.model(**batch).loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.5)

    lit = LitDecoder()
    held = held_batch()
    loader = torch.utils.data.DataLoader(_TokenDataset(64), batch_size=2)
    callback = HealthLightningCallback(every=5, batch=held, sinks=[JsonLinesSink(tmp_path / "h.jsonl")])
    trainer = L.Trainer(accelerator="cpu", max_steps=20, logger=TensorBoardLogger(str(tmp_path)),
                        callbacks=[callback, HealthLightningCallback(every=4, log_to_trainer=False,
                                                                     sinks=[JsonLinesSink(tmp_path / "s.jsonl")])],
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(lit, loader)

    scalars = read_tensorboard(tmp_path)
    assert [s for s, _ in scalars["residual/adjoint_ratio_max"]] == [5, 10, 15, 20]
    assert [s for s, _ in scalars["residual/block.0.after_attention/activation_ratio"]] == [5, 10, 15, 20]
    final = health_metrics(observe_residual_health(lit.model, held["input_ids"]))
    for tag in final:
        assert scalars[tag][-1][1] == pytest.approx(final[tag], rel=1e-6), tag
    assert [r["step"] for r in read_json_lines(tmp_path / "h.jsonl")] == [5, 10, 15, 20]
    steps = read_json_lines(tmp_path / "s.jsonl")
    assert [r["step"] for r in steps] == [4, 8, 12, 16, 20]
    assert steps[0]["residual/valid_positions"] == 2 * (12 - 1)


# ---- DistributedDataParallel ----------------------------------------------------------------------

def test_ddp_on_two_gloo_processes_observes_what_one_process_observes(tmp_path):
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch build has no gloo backend")
    run = subprocess.run([sys.executable, str(HERE / "ddp_health_worker.py"), str(tmp_path)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    one = read_json_lines(tmp_path / "single.jsonl")
    assert [r["step"] for r in one] == [2, 4, 6]
    assert not (tmp_path / "zero-1.jsonl").exists()  # rank 1 neither observes nor writes by default
    for name in ("zero-0.jsonl", "all-0.jsonl", "all-1.jsonl"):
        rows = read_json_lines(tmp_path / name)
        assert [r["step"] for r in rows] == [2, 4, 6], name
        for mine, theirs in zip(rows, one):
            assert set(mine) == set(theirs)
            for key, value in theirs.items():
                assert mine[key] == pytest.approx(value, rel=1e-10, abs=0), (name, key)
    assert read_json_lines(tmp_path / "all-0.jsonl") == read_json_lines(tmp_path / "all-1.jsonl")
    assert np.isfinite([v for r in one for v in r.values()]).all()
