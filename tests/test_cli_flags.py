# SPDX-License-Identifier: MIT
"""One meaning per option name across every subcommand: the flag table, the retired spellings
refused with their replacement, --quiet everywhere, the shifted-token default of --targets and one
form for file errors."""
import argparse
import json
import pathlib

import numpy as np
import pytest

from pydepth import DecoderConfig, cli
from pydepth.cli._flags import FLAGS, RETIRED, _Retired

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "examples" / "data" / "corpus.txt"


def subcommands():
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def metavar(action):
    shown = action.metavar
    return " ".join(shown) if isinstance(shown, tuple) else shown


def test_every_option_of_every_subcommand_has_the_one_meaning_of_the_flag_table():
    for name, sub in subcommands().items():
        for action in sub._actions:
            if isinstance(action, (argparse._HelpAction, _Retired)) or not action.option_strings:
                continue
            for flag in action.option_strings:
                assert flag in FLAGS, f"{name} {flag} is not in the flag table"
                assert metavar(action) == FLAGS[flag][0], f"{name} {flag}: {metavar(action)} != {FLAGS[flag][0]}"


def test_every_subcommand_takes_quiet_and_every_drawing_subcommand_takes_plot_dir():
    for name, sub in subcommands().items():
        assert "--quiet" in sub._option_string_actions, name
        if "--plot" in sub._option_string_actions:
            assert sub._option_string_actions["--plot"].metavar == "DIR", name


@pytest.mark.parametrize("key", sorted(RETIRED, key=str))
def test_a_retired_spelling_is_refused_in_one_line_naming_its_replacement(key, capsys):
    command, old = key
    names = [command] if command else [n for n, s in subcommands().items() if RETIRED[key] in s._option_string_actions]
    assert names
    for name in names:
        with pytest.raises(SystemExit) as info:
            cli.main([name, old, "1"])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{old} is retired; use {RETIRED[key]}" in err, err


def _config(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(DecoderConfig(266, 4, 1, 4, 2, 4).to_dict()))
    return str(path)


def test_observe_targets_default_to_the_tokens_shifted_by_one(tmp_path, capsys):
    base = ["observe", "--config", _config(tmp_path), "--seed", "4701", "--format", "json"]
    assert cli.main([*base, "--tokens", "0,99,100,101,1"]) == 0
    shifted = json.loads(capsys.readouterr().out)
    assert cli.main([*base, "--tokens", "0,99,100,101", "--targets", "99,100,101,1"]) == 0
    explicit = json.loads(capsys.readouterr().out)
    assert np.array([shifted["loss"]]).view(np.uint64) == np.array([explicit["loss"]]).view(np.uint64)
    assert shifted == explicit


def test_seed_defaults_to_the_chapters_seed(tmp_path, capsys):
    base = ["observe", "--config", _config(tmp_path), "--tokens", "0,99,100,101,1", "--format", "json"]
    assert cli.main(base) == 0
    assert json.loads(capsys.readouterr().out)["seed"] == 4701


def test_file_errors_name_the_path_then_the_reason(tmp_path, capsys):
    missing = tmp_path / "missing.json"
    assert cli.main(["observe", "--config", str(missing), "--tokens", "1,2"]) == 1
    assert capsys.readouterr().err == f"pydepth: error: {missing}: no such file or directory\n"
    assert cli.main(["train", str(tmp_path / "none.txt"), "--config", _config(tmp_path)]) == 1
    text = tmp_path / "none.txt"
    reason = "cannot open the training text: no such file or directory"
    assert capsys.readouterr().err == f"pydepth: error: {text}: {reason}\n"


def test_quiet_silences_the_wrote_lines(tmp_path, capsys):
    out = tmp_path / "o.json"
    base = ["observe", "--config", _config(tmp_path), "--tokens", "0,99,100,101,1", "--format", "json",
            "--output", str(out)]
    assert cli.main(base) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    assert cli.main([*base, "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_train_progress_shows_elapsed_and_time_left(tmp_path, capsys):
    config = tmp_path / "byte.json"
    config.write_text(json.dumps(DecoderConfig(256, 8, 1, 2, 16, 8).to_dict()))
    assert cli.main(["train", str(CORPUS), "--config", str(config), "--updates", "2", "--batch-rows", "1",
                     "--out", str(tmp_path / "t")]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("update ")]
    assert lines and all(" elapsed " in x and " left " in x for x in lines)
    assert lines[-1].startswith("update 2/2") and lines[-1].endswith("left 0:00")
