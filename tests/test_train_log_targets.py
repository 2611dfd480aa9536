# SPDX-License-Identifier: MIT
"""`pydepth train --log SPEC`: TensorBoard event files, an MLflow store and an offline W&B run
get the loss, learning rate and health metrics at the steps of train.jsonl and health.jsonl; a
bad spec, a missing package or a refused run writes nothing anywhere."""

import pathlib
import sys

import numpy as np
import pytest

from pydepth.cli import main
from pydepth.errors import LogSpecError
from pydepth.monitoring import targets
from pydepth.training.log import read_log
from conftest import need_extra, wandb_history, write_tiny_train_config

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "examples" / "data" / "corpus.txt"
UPDATES, EVERY = 5, 2


@pytest.fixture
def config(tmp_path):
    return str(write_tiny_train_config(tmp_path))


def train(config, out, *logs):
    argv = [
        "train",
        str(CORPUS),
        "--config",
        config,
        "--updates",
        str(UPDATES),
        "--batch-rows",
        "2",
        "--sequence-length",
        "8",
        "--observe-every",
        str(EVERY),
        "--out",
        str(out),
        "--quiet",
    ]
    for spec in logs:
        argv += ["--log", spec]
    return main(argv)


def logged(out):
    """(step -> loss of train.jsonl, step -> activation_ratio_max of health.jsonl)."""
    rows, observed = read_log(out / "train.jsonl"), read_log(out / "health.jsonl")
    return (
        {r["step"]: r["loss"] for r in rows},
        {r["step"]: max(site["activation_ratio"] for site in r["report"]["sites"]) for r in observed},
    )


def test_tensorboard_event_files_hold_loss_and_health_at_the_steps_of_the_json_logs(tmp_path, config):
    need_extra("train")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    out, board = tmp_path / "run", tmp_path / "tb"
    assert train(config, out, "tensorboard:" + str(board)) == 0
    assert list(board.glob("events.out.tfevents.*"))
    events = EventAccumulator(str(board))
    events.Reload()

    def series(tag):
        return {e.step: tensor_util.make_ndarray(e.tensor_proto).item() for e in events.Tensors(tag)}

    losses, ratios = logged(out)
    assert sorted(losses) == list(range(UPDATES))  # step 0 is the initialization's loss
    assert sorted(ratios) == [0, 2, 4, 5]  # every EVERY updates, and the final parameters
    board_losses, board_ratios = series("train/loss"), series("residual/activation_ratio_max")
    assert sorted(board_losses) == sorted(losses) and sorted(board_ratios) == sorted(ratios)
    # the writer stores float32 scalars: equal to the logs' float64 values rounded once
    assert all(np.float32(board_losses[s]) == np.float32(losses[s]) for s in losses)
    assert all(np.float32(board_ratios[s]) == np.float32(ratios[s]) for s in ratios)
    assert set(series("train/lr")) == set(losses)


@pytest.mark.parametrize("store", ["sqlite", "files"])
def test_an_mlflow_store_holds_loss_and_health_at_the_steps_of_the_json_logs(tmp_path, config, store, monkeypatch):
    need_extra("train")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps its file store behind this switch
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}" if store == "sqlite" else (tmp_path / "mlruns").as_uri()
    out = tmp_path / "run"
    assert train(config, out, "mlflow:" + uri) == 0
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("pydepth").experiment_id])
    losses, ratios = logged(out)
    assert {m.step: m.value for m in client.get_metric_history(run.info.run_id, "train/loss")} == losses
    history = client.get_metric_history(run.info.run_id, "residual/activation_ratio_max")
    assert {m.step: m.value for m in history} == ratios
    assert run.info.status == "FINISHED" and run.data.params["observe_every"] == str(EVERY)


def test_an_offline_wandb_run_inside_the_run_directory_holds_loss_and_health_at_the_json_logs_steps(tmp_path, config):
    need_extra("train")
    out = tmp_path / "run"
    assert train(config, out, "wandb") == 0
    rows = wandb_history(out / "wandb")
    losses, ratios = logged(out)
    assert {r["_step"]: r["train/loss"] for r in rows if "train/loss" in r} == losses
    assert {r["_step"]: r["residual/activation_ratio_max"] for r in rows if "residual/out_of_band" in r} == ratios


@pytest.mark.parametrize(
    "spec,says",
    [
        ("tensorboard", "needs a place"),
        ("mlflow:", "needs a place"),
        ("jsonl:x", "takes no place"),
        ("comet:x", "unknown logger 'comet'"),
        ("wandb:", "is empty"),
    ],
)
def test_a_bad_spec_is_refused_naming_it_before_anything_is_written(tmp_path, config, capsys, spec, says):
    with pytest.raises(LogSpecError, match=says):
        targets.parse_log_spec(spec)
    with pytest.raises(SystemExit) as info:
        train(config, tmp_path / "run", spec)
    assert info.value.code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_missing_logger_package_is_refused_naming_the_extra_before_anything_is_written(
    tmp_path, config, capsys, monkeypatch
):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # what an uninstalled package looks like to import
    assert train(config, tmp_path / "run", "tensorboard:" + str(tmp_path / "tb")) == 1
    err = capsys.readouterr().err
    assert "--log tensorboard needs the tensorboard package" in err and "pydepth[train]" in err, err
    assert not (tmp_path / "run").exists() and not (tmp_path / "tb").exists()


def test_a_run_refused_for_its_directory_opens_no_logger(tmp_path, config, capsys):
    need_extra("train")
    out = tmp_path / "run"
    assert train(config, out) == 0
    assert train(config, out, "tensorboard:" + str(tmp_path / "tb")) == 1
    assert "holds another run" in capsys.readouterr().err
    assert not (tmp_path / "tb").exists()


def test_a_place_that_is_a_file_is_refused_before_anything_is_written(tmp_path, config, capsys):
    need_extra("train")
    (tmp_path / "tb").write_text("not a directory")
    assert train(config, tmp_path / "run", "tensorboard:" + str(tmp_path / "tb")) == 1
    assert "exists and is not a directory" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_library_sinks_get_the_json_logs_records_at_their_steps(tmp_path):
    from pydepth import DecoderConfig
    from pydepth.training import TrainSettings, run_training

    seen = []
    result = run_training(
        TrainSettings(seed=3, batch=2, tokens=8, steps=3, observe_every=2),
        CORPUS.read_bytes(),
        tmp_path / "run",
        config=DecoderConfig(256, 8, 2, 16, 2, 8),
        sinks=lambda metrics, step: seen.append((step, dict(metrics))),
    )
    losses = {r["step"]: r["loss"] for r in read_log(result.train_log)}
    assert {s: m["train/loss"] for s, m in seen if "train/loss" in m} == losses
    assert [s for s, m in seen if "residual/out_of_band" in m] == [r["step"] for r in read_log(result.health_log)]


def test_a_logger_that_cannot_open_stops_the_run_before_its_first_step_naming_the_spec(
    tmp_path, config, capsys, monkeypatch
):
    def refuse(place, run_dir, settings):
        raise RuntimeError("the server is down")

    monkeypatch.setitem(targets.KINDS, "tensorboard", targets._Kind(None, "required", "a directory", refuse))
    out = tmp_path / "run"
    assert train(config, out, "tensorboard:" + str(tmp_path / "tb")) == 1
    err = capsys.readouterr().err
    assert "--log tensorboard:" in err and "cannot open the logger: RuntimeError: the server is down" in err, err
    assert sorted(p.name for p in out.iterdir()) == []  # no log, no checkpoint: a rerun is not refused
    assert train(config, out) == 0
