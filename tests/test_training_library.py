# SPDX-License-Identifier: MIT
"""The library owner of a training run: TrainSettings checked once, naming the bad field;
run_training equal bit for bit to ``pydepth train``; progress reported per step; exact resume."""
import json
import math
import pathlib

import numpy as np
import pytest
import safetensors.numpy

from pydepth import DecoderConfig, checkpoint
from pydepth.cli import main
from pydepth.training import (ResumeError, SettingsClashError, TrainSettings, TrainSettingsError, resume_settings,
                              run_training)

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "examples" / "data" / "corpus.txt"
TINY = {"vocabulary_size": 256, "model_width": 8, "heads": 2, "feed_forward_width": 16, "layers": 2,
        "max_positions": 16}


def bits(path):
    return {k: v.view(np.uint64) for k, v in safetensors.numpy.load_file(str(path)).items()}


def same_bits(a, b):
    ta, tb = bits(a), bits(b)
    return set(ta) == set(tb) and all(np.array_equal(ta[k], tb[k]) for k in ta)


def losses(directory):
    return [json.loads(x)["loss"] for x in (directory / "train.jsonl").read_text().splitlines()]


def test_a_library_run_equals_the_command_line_run_bit_for_bit(tmp_path):
    config_file = tmp_path / "tiny.json"
    config_file.write_text(json.dumps(TINY))
    assert main([str(a) for a in ("train", CORPUS, "--config", config_file, "--updates", 4, "--batch-rows", 2,
                                  "--sequence-length", 12, "--seed", 3, "--observe-every", 2,
                                  "--out", tmp_path / "cli")]) == 0
    settings = TrainSettings(steps=4, batch=2, tokens=12, seed=3, observe_every=2)
    result = run_training(settings, CORPUS.read_bytes(), tmp_path / "lib", config=DecoderConfig(**TINY),
                          text_name=CORPUS.name)
    assert result.step == 4 and not result.interrupted
    assert result.checkpoint == tmp_path / "lib" / "step-000004.safetensors"
    assert same_bits(tmp_path / "cli" / "step-000004.safetensors", result.checkpoint)
    assert losses(tmp_path / "cli") == losses(tmp_path / "lib") == result.losses
    assert (tmp_path / "cli" / "health.jsonl").read_text() == (tmp_path / "lib" / "health.jsonl").read_text()
    stored = checkpoint.load(result.checkpoint).extra["train"]
    assert TrainSettings.from_dict(stored) == result.settings == resume_settings(checkpoint.load(result.checkpoint))
    assert checkpoint.load(tmp_path / "cli" / "step-000004.safetensors").extra["train"] == stored


def test_the_progress_callback_sees_every_step_with_its_loss(tmp_path):
    seen, said = [], []
    result = run_training(TrainSettings(steps=3, batch=1, tokens=8), CORPUS.read_bytes(), tmp_path,
                          config=DecoderConfig(**TINY), on_progress=seen.append, on_message=said.append)
    assert [p.step for p in seen] == [1, 2, 3] and all(p.total == 3 and p.start == 0 for p in seen)
    assert [p.loss for p in seen] == result.losses == losses(tmp_path)
    assert all(math.isfinite(p.loss) and p.lr > 0 and p.seconds >= 0 for p in seen)
    assert said[0].startswith("training DecoderModel(") and said[-1].endswith("step-000003.safetensors")


def test_a_library_resume_continues_the_run_exactly(tmp_path):
    config, text = DecoderConfig(**TINY), CORPUS.read_bytes()
    settings = TrainSettings(steps=5, batch=2, tokens=12, policy="unscaled", checkpoint_every=2)
    full = run_training(settings, text, tmp_path / "full", config=config)
    ck = checkpoint.load(tmp_path / "full" / "step-000002.safetensors")
    resumed = run_training(resume_settings(ck), text, tmp_path / "part", resume=ck)
    assert resumed.step == 5 and resumed.losses == full.losses[2:]
    assert same_bits(full.checkpoint, resumed.checkpoint)


def test_a_resume_refuses_other_settings_another_text_and_a_foreign_checkpoint_before_writing(tmp_path):
    config, text = DecoderConfig(**TINY), CORPUS.read_bytes()
    run_training(TrainSettings(steps=2, batch=1, tokens=8), text, tmp_path / "a", config=config)
    ck = checkpoint.load(tmp_path / "a" / "step-000002.safetensors")
    with pytest.raises(SettingsClashError, match=r"batch 3 \(checkpoint: 1\)") as err:
        run_training(TrainSettings(steps=4, batch=3, tokens=8), text, tmp_path / "b", resume=ck)
    assert err.value.clashes[0][0] == "batch"
    with pytest.raises(ResumeError, match="differs from the text the checkpoint was trained on"):
        run_training(resume_settings(ck), b"Another text.\n\nTwo paragraphs of it.\n", tmp_path / "b", resume=ck)
    with pytest.raises(ResumeError, match="below the checkpoint's step 2"):
        run_training(resume_settings(ck).continued({"steps": 1}), text, tmp_path / "b", resume=ck)
    checkpoint.save(tmp_path / "bare.safetensors", ck.model)
    with pytest.raises(ResumeError, match="not written by a training run"):
        resume_settings(checkpoint.load(tmp_path / "bare.safetensors"))
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("field, value", [
    ("policy", "sideways"), ("seed", -1), ("seed", 2**64), ("batch", 0), ("batch", 2.0), ("tokens", 0),
    ("lr", float("nan")), ("lr", 0.0), ("min_lr", -1e-3), ("warmup", -1), ("weight_decay", float("inf")),
    ("steps", 0), ("steps", True), ("observe_every", "often"), ("checkpoint_every", -2), ("plot", 3)])
def test_bad_settings_are_refused_naming_the_field_and_the_value(field, value):
    with pytest.raises(TrainSettingsError, match=f"^{field} must be") as err:
        TrainSettings(**{field: value})
    assert err.value.field == field and err.value.value is value and repr(value) in str(err.value)


def test_settings_from_a_dict_refuse_an_unknown_key_and_a_tampered_value_by_name():
    stored = dict(TrainSettings().resolved(16).to_dict(), text_sha256="0" * 64, text_file="corpus.txt")
    assert TrainSettings.from_dict(stored) == TrainSettings().resolved(16)
    with pytest.raises(TrainSettingsError, match=r"^colour must be one of the settings"):
        TrainSettings.from_dict({"colour": "blue"})
    with pytest.raises(TrainSettingsError, match=r"^observe_every must be a non-negative integer, got 'often'"):
        TrainSettings.from_dict(dict(stored, observe_every="often"))
    with pytest.raises(TrainSettingsError, match=r"^settings must be a mapping"):
        TrainSettings.from_dict([("seed", 1)])  # type: ignore[arg-type]


def test_resolved_settings_take_the_defaults_that_depend_on_the_run():
    s = TrainSettings(lr=0.02, steps=50).resolved(32)
    assert (s.tokens, s.min_lr, s.warmup) == (32, 0.002, 5)
    assert TrainSettings(tokens=8, min_lr=0.0, warmup=0).resolved(32) == TrainSettings(tokens=8, min_lr=0.0, warmup=0)
