# SPDX-License-Identifier: MIT
"""`pydepth train` on the bundled corpus: interrupted and resumed runs equal the uninterrupted
run bit for bit; observing does not change training; byte documents and packed batches."""
import json
import os
import pathlib
import signal

import numpy as np
import pytest
import safetensors.numpy

import pydepth
from pydepth import DecoderConfig, DecoderModel, DepthInitializationBudget, Fresh, SplitMix64, initialize_depth_scaled
from pydepth import checkpoint
from pydepth.cli import main
from pydepth.training.step import byte_documents, draw_batch
from conftest import TINY_TRAIN, need_extra, write_tiny_train_config

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "examples" / "data" / "corpus.txt"
TINY = TINY_TRAIN


@pytest.fixture
def config(tmp_path):
    return write_tiny_train_config(tmp_path)


def run(*argv):
    return main([str(a) for a in argv])


def tensors(path):
    return {k: v.view(np.uint64) for k, v in safetensors.numpy.load_file(str(path)).items()}


def assert_same_checkpoint(a, b):
    ta, tb = tensors(a), tensors(b)
    assert set(ta) == set(tb) and any(k.startswith("optimizer.") for k in ta)
    assert all(np.array_equal(ta[k], tb[k]) for k in ta)
    ca, cb = checkpoint.load(a), checkpoint.load(b)
    assert ca.rng == cb.rng and ca.step == cb.step and ca.optimizer_state["step"] == cb.optimizer_state["step"]


def test_the_bundled_corpus_is_original_plain_text_of_tens_of_kilobytes():
    text = CORPUS.read_bytes()
    assert 20_000 <= len(text) <= 100_000
    assert max(text) < 128  # plain ASCII: every byte id is a printable character or newline
    assert len(byte_documents(text)) > 50


def test_interrupted_and_resumed_run_equals_the_uninterrupted_run(tmp_path, config, monkeypatch):
    common = ["--config", config, "--updates", 6, "--batch-rows", 2, "--sequence-length", 16, "--seed", 3, "--lr", 1e-2]
    assert run("train", CORPUS, *common, "--out", tmp_path / "full") == 0

    from pydepth.training import step as train_module
    real_step = train_module.train_step
    calls = []

    def interrupting_step(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C during step 2: the step still completes
        return real_step(*args, **kwargs)
    monkeypatch.setattr(train_module, "train_step", interrupting_step)
    assert run("train", CORPUS, *common, "--out", tmp_path / "part") == 130
    monkeypatch.setattr(train_module, "train_step", real_step)
    stopped = tmp_path / "part" / "step-000002.safetensors"
    assert checkpoint.load(stopped).step == 2
    assert not (tmp_path / "part" / "step-000006.safetensors").exists()

    assert run("train", CORPUS, "--resume", stopped, "--out", tmp_path / "part") == 0
    assert_same_checkpoint(tmp_path / "full" / "step-000006.safetensors", tmp_path / "part" / "step-000006.safetensors")
    full = (tmp_path / "full" / "train.jsonl").read_text().splitlines()
    part = (tmp_path / "part" / "train.jsonl").read_text().splitlines()
    assert [json.loads(x)["loss"] for x in full] == [json.loads(x)["loss"] for x in part]


def test_periodic_checkpoints_resume_exactly_and_observing_changes_nothing(tmp_path, config):
    common = ["--config", config, "--updates", 5, "--batch-rows", 2, "--sequence-length", 12, "--policy", "unscaled"]
    assert run("train", CORPUS, *common, "--out", tmp_path / "a", "--checkpoint-every", 2) == 0
    assert sorted(p.name for p in (tmp_path / "a").glob("*.safetensors")) == [
        "step-000002.safetensors", "step-000004.safetensors", "step-000005.safetensors"]
    assert run("train", CORPUS, *common, "--out", tmp_path / "b", "--observe-every", 1) == 0
    assert_same_checkpoint(tmp_path / "a" / "step-000005.safetensors", tmp_path / "b" / "step-000005.safetensors")
    health = [json.loads(x) for x in (tmp_path / "b" / "health.jsonl").read_text().splitlines()]
    assert [h["step"] for h in health] == [0, 1, 2, 3, 4, 5]  # every step, then the final parameters
    assert all(len(h["report"]["sites"]) == 2 * TINY["layers"] + 1 for h in health)
    assert run("train", CORPUS, "--resume", tmp_path / "a" / "step-000002.safetensors", "--out", tmp_path / "c") == 0
    assert_same_checkpoint(tmp_path / "a" / "step-000005.safetensors", tmp_path / "c" / "step-000005.safetensors")


def test_plot_shows_loss_and_site_ratios(tmp_path, config):
    need_extra("plot")
    out = tmp_path / "p"
    assert run("train", CORPUS, "--config", config, "--updates", 3, "--batch-rows", 1, "--sequence-length", 8,
               "--observe-every", 1, "--out", out, "--plot", out) == 0
    assert (out / "train.png").stat().st_size > 10_000
    assert run("train", CORPUS, "--resume", out / "step-000003.safetensors", "--updates", 4, "--out", out,
               "--plot", out / "figure") == 0
    assert (out / "figure" / "train.png").exists() and (out / "figure" / "train.svg").exists()


def health_rows(directory):
    return [json.loads(x) for x in (directory / "health.jsonl").read_text().splitlines()]


def test_a_resumed_run_keeps_its_observe_checkpoint_and_plot_options_and_its_directory(tmp_path, config):
    need_extra("plot")
    full, part = tmp_path / "full", tmp_path / "part"
    common = ["--config", config, "--batch-rows", 2, "--sequence-length", 12, "--seed", 3, "--updates", 6]
    assert run("train", CORPUS, *common, "--observe-every", 2, "--checkpoint-every", 2, "--out", full,
               "--plot", full) == 0
    part.mkdir()
    (part / "step-000002.safetensors").write_bytes((full / "step-000002.safetensors").read_bytes())
    (full / "train.png").unlink()
    # no --out, --observe-every, --checkpoint-every or --plot: all come from the checkpoint
    assert run("train", CORPUS, "--resume", part / "step-000002.safetensors") == 0
    assert sorted(p.name for p in part.glob("*.safetensors")) == [
        "step-000002.safetensors", "step-000004.safetensors", "step-000006.safetensors"]
    assert [h["step"] for h in health_rows(part)] == [2, 4, 6]
    assert health_rows(part) == [h for h in health_rows(full) if h["step"] >= 2]
    assert_same_checkpoint(full / "step-000006.safetensors", part / "step-000006.safetensors")
    assert (part / "train.png").stat().st_size > 10_000  # the stored --plot, inside the resumed run's directory
    assert not (full / "train.png").exists()  # a stored path never leaves the output directory
    # a value given again wins over the stored one
    assert run("train", CORPUS, "--resume", part / "step-000004.safetensors", "--observe-every", 0,
               "--out", tmp_path / "quiet") == 0
    assert health_rows(tmp_path / "quiet") == []


def test_the_end_observation_is_what_a_longer_run_observes_at_that_step(tmp_path, config):
    common = ["--batch-rows", 2, "--sequence-length", 12, "--seed", 5, "--observe-every", 2]
    assert run("train", CORPUS, "--config", config, *common, "--updates", 6, "--checkpoint-every", 4,
               "--out", tmp_path / "long") == 0
    # resumed at step 4 with nothing left to train: only the end observation of the parameters after 4 updates
    assert run("train", CORPUS, "--resume", tmp_path / "long" / "step-000004.safetensors", "--updates", 4,
               "--observe-every", 2, "--out", tmp_path / "short") == 0
    long, short = health_rows(tmp_path / "long"), health_rows(tmp_path / "short")
    assert [h["step"] for h in long] == [0, 2, 4, 6] and [h["step"] for h in short] == [4]
    assert short[0] == long[2]  # same parameters, same batch (the generator was copied, not advanced)


def test_a_resumed_run_writes_the_health_log_of_the_uninterrupted_run(tmp_path, config, monkeypatch):
    common = ["--config", config, "--batch-rows", 2, "--sequence-length", 12, "--seed", 5, "--observe-every", 2,
              "--updates", 7]
    assert run("train", CORPUS, *common, "--out", tmp_path / "full") == 0
    from pydepth.training import step as train_module
    real_step, calls = train_module.train_step, []

    def interrupting_step(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C during step 3: stop with 3 updates
        return real_step(*args, **kwargs)
    monkeypatch.setattr(train_module, "train_step", interrupting_step)
    assert run("train", CORPUS, *common, "--out", tmp_path / "part") == 130
    monkeypatch.setattr(train_module, "train_step", real_step)
    assert [h["step"] for h in health_rows(tmp_path / "part")] == [0, 2, 3]  # 3: the stopped run's end
    assert run("train", CORPUS, "--resume", tmp_path / "part" / "step-000003.safetensors",
               "--observe-every", 2, "--out", tmp_path / "part") == 0
    assert [h["step"] for h in health_rows(tmp_path / "full")] == [0, 2, 4, 6, 7]
    assert health_rows(tmp_path / "part") == health_rows(tmp_path / "full")


def test_the_training_plot_has_integer_step_ticks_and_reaches_the_final_step(tmp_path, config, monkeypatch):
    need_extra("plot")
    from pydepth.plots import train as plots_train
    from pydepth.plots.style import texts_outside_figure
    figures = []
    monkeypatch.setattr(plots_train, "save_figure", lambda fig, target, formats=None: figures.append(fig) or [])
    assert run("train", CORPUS, "--config", config, "--updates", 7, "--batch-rows", 1, "--sequence-length", 8,
               "--observe-every", 3, "--out", tmp_path / "o", "--plot", tmp_path / "o") == 0
    (fig,) = figures
    fig.canvas.draw()
    assert texts_outside_figure(fig) == []
    for ax in [a for a in fig.axes if a.get_label() != "<colorbar>"]:  # the three step axes
        lo, hi = ax.get_xlim()
        ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
        last = max(x for line in ax.get_lines() for x in line.get_xdata())
        assert last == 7 and hi >= 7  # the final parameters (after 7 updates) are drawn on every panel


def test_packed_batches_fill_every_row_with_byte_segments_drawn_from_the_generator():
    docs = byte_documents(b"ab\n\n\n  \nhello world\n\nx\n\nthe end of it")
    assert [bytes(d.astype(np.uint8)) for d in docs] == [b"ab\n", b"hello world\n", b"x\n", b"the end of it\n"]
    rng = SplitMix64(9)
    batch = draw_batch(docs, rng, 3, 10)
    assert batch.shape == (3, 10) and batch.valid.all()
    assert batch.tokens.max() < 256 and len(batch.segments()) > 3
    again = draw_batch(docs, SplitMix64(9), 3, 10)
    assert np.array_equal(again.tokens, batch.tokens) and rng.state != SplitMix64(9).state


def test_both_policies_leave_the_generator_in_the_same_state():
    cfg = DecoderConfig(**TINY)
    a, b = SplitMix64(4), SplitMix64(4)
    initialize_depth_scaled(Fresh(cfg, DepthInitializationBudget(cfg.parameter_count, cfg.max_positions), a))
    DecoderModel(cfg, b)
    assert a == b  # so scaled and unscaled runs of one seed see the same batches


def test_the_readme_train_command_names_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.strip().startswith("pydepth train "))
    for word in line.split():
        if word.startswith("examples/"):
            assert (ROOT / word).exists(), word
    assert pydepth.checkpoint.CHECKPOINT_FORMAT == 1


def test_training_runs_outside_the_main_thread_without_a_signal_handler(tmp_path, config):
    import threading
    codes = []
    worker = threading.Thread(target=lambda: codes.append(run(
        "train", CORPUS, "--config", config, "--updates", 1, "--batch-rows", 1, "--out", tmp_path / "t")))
    worker.start()
    worker.join()
    assert codes == [0] and (tmp_path / "t" / "step-000001.safetensors").exists()


def test_the_example_data_readme_states_the_configs_true_parameter_count():
    import json
    import re
    data = ROOT / "examples" / "data"
    config = pydepth.DecoderConfig.from_dict(json.loads((data / "byte-8block.json").read_text()))
    stated = re.search(r"([\d,]+) parameters", (data / "README.md").read_text()).group(1)
    assert int(stated.replace(",", "")) == config.parameter_count


def test_train_ends_with_one_summary_line_on_stdout(tmp_path, config, capsys):
    assert run("train", CORPUS, "--config", config, "--updates", 3, "--batch-rows", 1, "--sequence-length", 8,
               "--out", tmp_path / "o") == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("trained to step 3 of 3 (3 steps in ")
    assert "last loss " in out[0] and out[0].endswith(f"checkpoint {tmp_path / 'o' / 'step-000003.safetensors'}")
