# SPDX-License-Identifier: MIT
"""A run directory belongs to one run: a lock with pid and host (stale ones taken over), a fresh
run refused where another run is unless overwrite moves it aside, re-entrant runs refused, and
no write following a link planted in the directory."""
import json
import os
import pathlib
import socket
import subprocess
import sys

import pytest

from pydepth import DecoderConfig, checkpoint
from pydepth.cli import main
from pydepth.errors import PydepthError, RunDirectoryError
from pydepth._files.lock import LOCK_FILE, holding
from pydepth.training import TrainSettings, resume_settings, run_training

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "examples" / "data" / "corpus.txt"
CONFIG = DecoderConfig(256, 8, 2, 16, 2, 16)
SETTINGS = TrainSettings(steps=3, batch=2, tokens=8, seed=1, observe_every=0, checkpoint_every=1)


def train(out, **kw):
    return run_training(kw.pop("settings", SETTINGS), CORPUS.read_bytes(), out, config=CONFIG, **kw)


def snapshot(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def test_a_fresh_run_into_a_directory_holding_a_run_is_refused_and_changes_nothing(tmp_path):
    train(tmp_path / "run")
    before = snapshot(tmp_path / "run")
    with pytest.raises(RunDirectoryError, match="holds another run") as info:
        train(tmp_path / "run", settings=TrainSettings(steps=2, batch=2, tokens=8, seed=9, observe_every=0))
    assert str(tmp_path / "run") in str(info.value) and isinstance(info.value, PydepthError)
    assert snapshot(tmp_path / "run") == before


def test_overwrite_moves_the_old_run_aside_to_a_sibling_and_deletes_nothing(tmp_path):
    train(tmp_path / "run")
    before = snapshot(tmp_path / "run")
    train(tmp_path / "run", settings=TrainSettings(steps=2, batch=2, tokens=8, seed=9, observe_every=0),
          overwrite=True)
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("run.old-")]
    assert len(aside) == 1 and snapshot(aside[0]) == before
    assert sorted(p.name for p in (tmp_path / "run").glob("step-*")) == ["step-000002.safetensors"]
    assert not (tmp_path / "run" / LOCK_FILE).exists() and not (aside[0] / LOCK_FILE).exists()


def test_a_run_started_from_a_progress_callback_into_the_same_directory_is_refused(tmp_path):
    seen = []

    def nested(progress):
        try:
            train(tmp_path / "run", overwrite=True)
        except RunDirectoryError as err:
            seen.append(str(err))
    result = train(tmp_path / "run", on_progress=nested)
    assert result.step == 3 and len(seen) == 3 and "this very process" in seen[0]
    assert [json.loads(x)["step"] for x in (tmp_path / "run" / "train.jsonl").read_text().splitlines()] == [0, 1, 2]


def test_a_live_lock_of_another_process_refuses_the_run_naming_its_pid(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / LOCK_FILE).write_text(json.dumps({"pid": os.getppid(), "host": socket.gethostname()}))
    with pytest.raises(RunDirectoryError, match=f"in use by process {os.getppid()}"):
        train(tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [LOCK_FILE]


def test_a_stale_lock_whose_pid_is_gone_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / LOCK_FILE).write_text(json.dumps({"pid": int(dead), "host": socket.gethostname()}))
    assert train(tmp_path / "run").step == 3
    assert not (tmp_path / "run" / LOCK_FILE).exists()


def test_two_holders_of_one_directory_cannot_overlap(tmp_path):
    with holding(tmp_path, "first"), pytest.raises(RunDirectoryError, match="first"), holding(tmp_path, "second"):
        pass
    with holding(tmp_path, "third"):
        pass


@pytest.mark.parametrize("name", ["train.jsonl", "health.jsonl"])
def test_a_linked_log_in_a_fresh_run_is_replaced_and_its_target_untouched(tmp_path, name):
    secret = tmp_path / "secret.txt"
    secret.write_text("keep me\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / name).symlink_to(secret)
    with pytest.raises(RunDirectoryError):  # a directory holding a log holds a run
        train(tmp_path / "run")
    train(tmp_path / "run", overwrite=True)
    assert secret.read_text() == "keep me\n"
    assert not (tmp_path / "run" / name).is_symlink()


def test_resuming_replaces_a_linked_log_instead_of_rewriting_its_target(tmp_path):
    train(tmp_path / "run")
    secret = tmp_path / "secret.txt"
    secret.write_text(json.dumps({"step": 1}) + "\n" + json.dumps({"step": 9}) + "\n")
    log = tmp_path / "run" / "train.jsonl"
    log.unlink()
    log.symlink_to(secret)
    ck = checkpoint.load(tmp_path / "run" / "step-000002.safetensors")
    with pytest.raises(PydepthError, match="outside"):
        run_training(resume_settings(ck), CORPUS.read_bytes(), tmp_path / "run", resume=ck)
    assert secret.read_text().count("\n") == 2


def test_a_checkpoint_name_planted_as_a_link_is_replaced_not_written_through(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("keep me\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "step-000001.safetensors").symlink_to(secret)
    train(tmp_path / "run", overwrite=True)
    assert secret.read_text() == "keep me\n"


def test_the_command_line_refuses_a_second_fresh_run_in_one_line_and_overwrite_moves_it(tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text(json.dumps(CONFIG.to_dict()))
    args = ["train", str(CORPUS), "--config", str(config), "--updates", "1", "--batch-rows", "2",
            "--sequence-length", "8", "--out", str(tmp_path / "run")]
    assert main(args) == 0
    assert main(args) == 1
    assert "holds another run" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0
    assert any(p.name.startswith("run.old-") for p in tmp_path.iterdir())
