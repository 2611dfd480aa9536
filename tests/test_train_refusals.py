# SPDX-License-Identifier: MIT
"""`pydepth train` refusals: bad settings and texts named in one line, a memory budget
checked before allocating, Ctrl-C and SIGTERM inside a step, stored options checked like the
command line's and kept inside the run's directory, a torn last log line."""
import json
import os
import pathlib
import signal
import struct
import subprocess
import sys
import time

import pytest
from conftest import TINY_TRAIN, need_extra, write_tiny_train_config

import pydepth
from pydepth import checkpoint
from pydepth.cli import main
from pydepth.training import (TrainBudgetError, TrainSettings, TrainSettingsError, TrainingError,
                              resume_settings, run_training)

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "examples" / "data" / "corpus.txt"
TINY = TINY_TRAIN
ENV = dict(os.environ, PYDEPTH_NUM_THREADS="1")


@pytest.fixture
def config(tmp_path):
    return write_tiny_train_config(tmp_path)


def train(*argv):
    return main(["train", *(str(a) for a in argv)])


def edit_train_extra(path, edit):
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = json.loads(header["__metadata__"]["pydepth"])
    edit(meta["extra"]["train"])
    header["__metadata__"]["pydepth"] = json.dumps(meta)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data stays 8-byte aligned, as safetensors writers keep it
    path.write_bytes(struct.pack("<Q", len(text)) + text + blob[8 + n:])


@pytest.fixture
def short_run(tmp_path, config):
    out = tmp_path / "run"
    assert train(CORPUS, "--config", config, "--updates", 2, "--batch-rows", 2, "--out", out) == 0
    return out / "step-000002.safetensors"


# ---- item 2: unbounded runs

def test_a_billion_row_batch_is_refused_before_anything_is_allocated(tmp_path, config, capsys):
    t0 = time.perf_counter()
    assert train(CORPUS, "--config", config, "--batch-rows", 10**9, "--out", tmp_path / "big") == 1
    assert time.perf_counter() - t0 < 5.0
    err = capsys.readouterr().err
    assert "batch 1000000000 x sequence length 16" in err and "memory budget" in err
    assert not (tmp_path / "big").exists()


def test_a_checkpoint_storing_a_billion_row_batch_is_refused_on_resume(tmp_path, short_run, capsys):
    edit_train_extra(short_run, lambda t: t.update(batch=10**9))
    assert train(CORPUS, "--resume", short_run, "--updates", 4) == 1
    assert "memory budget" in capsys.readouterr().err


def test_the_budget_refusal_is_a_typed_error_of_run_training(tmp_path):
    with pytest.raises(TrainBudgetError, match="needs about"):
        run_training(TrainSettings(batch=64, steps=1), CORPUS.read_bytes(), tmp_path,
                     config=pydepth.DecoderConfig(**TINY), memory_budget=1 << 20)


SIGNAL_RUN = """
import sys
from pydepth.cli import main
sys.exit(main(["train", sys.argv[1], "--config", sys.argv[2], "--updates", "100000", "--batch-rows", "64",
               "--sequence-length", "256", "--out", sys.argv[3]]))
"""
BIG = {"vocabulary_size": 256, "model_width": 64, "heads": 4, "feed_forward_width": 256, "layers": 8,
       "max_positions": 256}


@pytest.mark.skipif(os.name != "posix", reason="signals to a child process")
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_inside_a_long_step_stops_it_and_checkpoints_the_step_before(tmp_path, sig, code):
    cfg = tmp_path / "big.json"
    cfg.write_text(json.dumps(BIG))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-P", "-c", SIGNAL_RUN, str(CORPUS), str(cfg), str(out)],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ((out / "train.jsonl").exists() and (out / "train.jsonl").read_text().count("\n") >= 1):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else ""
            time.sleep(0.02)
        time.sleep(0.05)  # inside a later step (a step takes far longer than this)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err
    [final] = out.glob("step-*.safetensors")
    ck = checkpoint.load(final)
    logged = (out / "train.jsonl").read_text().splitlines()
    assert ck.step == len(logged)  # the abandoned step left no trace: resume redoes it


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_sigterm_during_start_up_is_one_line_and_status_143(tmp_path, config):
    code = ("import os, signal, sys\nfrom pydepth.cli import main\nimport pydepth.training.run as r\n"
            "real = r._fresh\n"
            "def slow(*a, **k):\n    os.kill(os.getpid(), signal.SIGTERM)\n    return real(*a, **k)\n"
            "r._fresh = slow\n"
            f"sys.exit(main(['train', {str(CORPUS)!r}, '--config', {str(config)!r}, "
            f"'--out', {str(tmp_path / 'o')!r}]))")
    proc = subprocess.run([sys.executable, "-P", "-c", code], env=ENV, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 143 and "Traceback" not in proc.stderr and "terminated" in proc.stderr


# ---- item 4: stored options

@pytest.mark.parametrize("field,value,named", [
    ("plot", "ABSOLUTE", "plot must be a relative path inside the run's directory"),
    ("plot", "../pwned", "plot must be a relative path"),
    ("policy", "evil", "policy must be one of"),
    ("batch", 0, "batch must be a positive integer"),
    ("lr", "0.1", "lr must be a finite positive number"),
    ("seed", 2**64, "seed must be an integer in"),
    ("observe_every", -1, "observe_every must be a non-negative integer"),
    ("surprise", 1, "surprise must be one of the settings"),
])
def test_a_crafted_stored_option_is_refused_like_the_command_line_would(tmp_path, short_run, capsys,
                                                                         field, value, named):
    elsewhere = tmp_path / "elsewhere" / "pwned"  # outside the run's directory
    value = str(elsewhere) if value == "ABSOLUTE" else value
    edit_train_extra(short_run, lambda t: t.update({field: value}))
    assert train(CORPUS, "--resume", short_run, "--updates", 3) == 1
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err
    assert not elsewhere.parent.exists() and not (short_run.parent.parent / "pwned.png").exists()
    assert sorted(p.name for p in short_run.parent.glob("*.safetensors")) == ["step-000002.safetensors"]


@pytest.mark.parametrize("train_extra", [[], "x", {"batch": [1]}, {"steps": {"a": 1}}, {"plot": 3}, None])
def test_a_crafted_train_entry_is_a_typed_error(short_run, train_extra):
    blob = short_run.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = json.loads(header["__metadata__"]["pydepth"])
    meta["extra"]["train"] = train_extra
    header["__metadata__"]["pydepth"] = json.dumps(meta)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    short_run.write_bytes(struct.pack("<Q", len(text)) + text + blob[8 + n:])
    with pytest.raises(TrainingError):
        resume_settings(checkpoint.load(short_run))


def test_a_fresh_run_stores_its_plot_relative_to_its_directory_and_never_outside(tmp_path, config):
    out = tmp_path / "run"
    settings = TrainSettings(steps=1, batch=1, plot=str(out / "figs" / "loss"))
    run_training(settings, CORPUS.read_bytes(), out, config=pydepth.DecoderConfig(**TINY))
    assert checkpoint.load(out / "step-000001.safetensors").extra["train"]["plot"] == os.path.join("figs", "loss")
    settings = TrainSettings(steps=1, batch=1, plot=str(tmp_path / "elsewhere"))
    run_training(settings, CORPUS.read_bytes(), tmp_path / "run2", config=pydepth.DecoderConfig(**TINY))
    assert checkpoint.load(tmp_path / "run2" / "step-000001.safetensors").extra["train"]["plot"] is None
    with pytest.raises(TrainSettingsError, match="plot"):
        TrainSettings.from_dict({"plot": "/etc/x"})


# ---- item 7: a torn log

def test_a_torn_last_line_of_train_jsonl_is_dropped_with_a_warning_on_resume(tmp_path, short_run):
    log = short_run.parent / "train.jsonl"
    log.write_text(log.read_text() + '{"step": 3, "loss": 5.4')
    with pytest.warns(UserWarning, match="torn last line"):
        assert train(CORPUS, "--resume", short_run, "--updates", 3) == 0
    assert [json.loads(x)["step"] for x in log.read_text().splitlines()] == [0, 1, 2]


def test_a_damaged_middle_line_is_refused_naming_it(tmp_path, short_run, capsys):
    log = short_run.parent / "train.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("garbage\n" + "\n".join(lines) + "\n")
    assert train(CORPUS, "--resume", short_run, "--updates", 3) == 1
    assert "line 1 is not a log record" in capsys.readouterr().err


def test_the_exit_codes_130_and_143_are_documented():
    from pydepth.cli import EXIT_CODES
    assert "130 interrupted" in EXIT_CODES and "143 terminated" in EXIT_CODES
    readme = (ROOT / "README.md").read_text()
    assert "143" in readme and "130" in readme


@pytest.mark.parametrize("command", ["train", "sweep"])
def test_a_config_or_spec_file_nested_a_hundred_thousand_deep_is_one_line(tmp_path, capsys, command):
    if command == "sweep":
        need_extra("sweep")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    argv = (["train", str(CORPUS), "--config", str(deep), "--out", str(tmp_path / "o")] if command == "train"
            else ["sweep", str(deep), "--out", str(tmp_path / "o"), "--scheduler", "serial"])
    assert main(argv) == 1
    assert "too deeply" in capsys.readouterr().err


def test_refusals_name_the_problem(tmp_path, config, capsys):
    small = tmp_path / "small.json"
    small.write_text(json.dumps(dict(TINY, vocabulary_size=100)))
    assert train(CORPUS, "--config", small, "--updates", 1, "--out", tmp_path / "x") == 1
    assert "vocabulary_size >= 256, got 100" in capsys.readouterr().err
    assert train(CORPUS, "--config", config, "--sequence-length", 17, "--updates", 1,
               "--out", tmp_path / "x") == 1
    assert "max_positions=16], got 17" in capsys.readouterr().err
    assert train(CORPUS, "--config", config, "--updates", 2, "--batch-rows", 1, "--out", tmp_path / "r") == 0
    ck = tmp_path / "r" / "step-000002.safetensors"
    other = tmp_path / "other.txt"
    other.write_text("A different text.\n\nWith two paragraphs.\n")
    assert train(other, "--resume", ck, "--out", tmp_path / "r") == 1
    assert "differs from the text the checkpoint was trained on" in capsys.readouterr().err
    assert train(CORPUS, "--resume", ck, "--batch-rows", 3, "--out", tmp_path / "r") == 1
    assert "--batch-rows 3 (checkpoint: 1)" in capsys.readouterr().err
    assert train(CORPUS, "--updates", 2, "--out", tmp_path / "r") == 1
    assert "--config is required" in capsys.readouterr().err
    assert train(CORPUS, "--config", config, "--lr", "nan", "--out", tmp_path / "x") == 1
    assert "--lr must be a finite positive number, got nan" in capsys.readouterr().err
    assert train(CORPUS, "--config", config, "--weight-decay", "-1", "--out", tmp_path / "x") == 1
    assert "--weight-decay must be finite and non-negative, got -1.0" in capsys.readouterr().err


def test_a_resume_refuses_a_tampered_stored_option(tmp_path, config, capsys):
    out = tmp_path / "t"
    assert train(CORPUS, "--config", config, "--batch-rows", 1, "--sequence-length", 8, "--updates", 1,
               "--out", out) == 0
    ck = checkpoint.load(out / "step-000001.safetensors")
    extra = dict(ck.extra)
    extra["train"] = {**extra["train"], "observe_every": "often"}
    checkpoint.save(out / "bad.safetensors", ck.model, optimizer=ck.optimizer(), rng=ck.rng, record=ck.record,
                    step=ck.step, extra=extra)
    assert train(CORPUS, "--resume", out / "bad.safetensors", "--updates", 2) == 1
    assert "observe_every" in capsys.readouterr().err and not (out / "step-000002.safetensors").exists()
