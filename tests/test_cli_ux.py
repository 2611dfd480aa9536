# SPDX-License-Identifier: MIT
"""The command line as a new user meets it: --version, help on every option, the same option
names everywhere, observe --control/--band/--output, and a clear message from an unbuilt tree."""
import argparse
import json
import pathlib
import shutil
import subprocess
import sys

import pytest

import pydepth
from pydepth import DecoderConfig, cli

SOURCE = pathlib.Path(__file__).resolve().parents[1]


def subparsers():
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, action.choices


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith(f"pydepth {pydepth.__version__} (core kernels: ")


def test_every_option_of_every_subcommand_has_help():
    parser, subs = subparsers()
    assert set(subs) == set(cli.SUBCOMMANDS)
    from pydepth.cli._flags import _Retired
    for name, sub in [("pydepth", parser), *subs.items()]:
        for action in sub._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction, _Retired)):
                continue  # retired spellings are refused, deliberately unlisted
            flag = (action.option_strings or [action.dest])[0]  # positionals have no option string
            assert action.help and action.help != argparse.SUPPRESS, f"{name} {flag}"


# Options the shared helpers in pydepth/cli/_args.py define: one name, one meaning everywhere.
# --tokens is always token ids; a count of tokens per row is --sequence-length.
SHARED = ("--config", "--seed", "--format", "--output", "--band", "--control", "--batch-rows", "--tokens",
          "--sequence-length")


def test_a_shared_option_means_one_thing_everywhere():
    _, subs = subparsers()
    seen = {}
    for name, sub in subs.items():
        for action in sub._actions:
            if action.help == argparse.SUPPRESS:
                continue
            for opt in set(action.option_strings) & set(SHARED):
                kind = (action.type, action.nargs, action.const, action.choices)
                assert seen.setdefault(opt, (name, kind))[1] == kind, (
                    f"{opt} differs between {seen[opt][0]} and {name}")
    assert {"--config", "--seed", "--format", "--output", "--band", "--control"} <= set(seen)


def test_observe_tokens_are_ids_and_laptop_counts_with_sequence_length():
    _, subs = subparsers()
    opts = {name: {o: a for a in sub._actions for o in a.option_strings} for name, sub in subs.items()}
    assert opts["observe"]["--tokens"].type is opts["trace"]["--tokens"].type
    assert opts["observe"]["--tokens"].metavar == "IDS"
    assert opts["laptop"]["--sequence-length"].metavar == "N"


def test_laptop_old_tokens_option_is_refused_naming_sequence_length(capsys):
    small = ["laptop", "--vocabulary-size", "64", "--model-width", "8", "--layers", "1", "--heads", "2",
             "--kv-heads", "1", "--feed-forward-width", "8", "--max-positions", "8"]
    with pytest.raises(SystemExit) as info:
        cli.main([*small, "--tokens", "5", "--format", "json"])
    assert info.value.code == 2
    assert "--tokens is retired; use --sequence-length" in capsys.readouterr().err
    assert cli.main([*small, "--sequence-length", "6", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["tokens"] == 6 and "warning" not in captured.err


def test_shared_options_have_one_name_and_meaning():
    _, subs = subparsers()
    opts = {name: {o: a for a in sub._actions for o in a.option_strings} for name, sub in subs.items()}
    for name in ("demo", "observe", "laptop"):
        assert opts[name]["--format"].choices == ("json", "table")
        assert "--output" in opts[name] and "--plot" in opts[name]
    for name in ("observe", "laptop"):
        assert {"--control", "--band", "--seed"} <= set(opts[name])
    for name in ("observe", "trace"):
        assert {"--config", "--seed", "--tokens", "--targets", "--batch-rows"} <= set(opts[name])
    assert "--output" in opts["trace"]


def _cfg(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(DecoderConfig(266, 4, 1, 4, 8, 4).to_dict()))
    return ["observe", "--config", str(path), "--seed", "4701", "--tokens", "0,99,100,101",
            "--targets", "99,100,101,1"]


def test_observe_control_equals_the_demo_control(tmp_path, capsys):
    from pydepth.chapter.demo import demo_trace
    assert cli.main([*_cfg(tmp_path), "--control", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    want = demo_trace()["fixtures"][2]["same_base_unscaled_control"]
    assert doc["same_base_unscaled_control"]["loss"] == want["loss"]
    assert doc["same_base_unscaled_control"]["report"] == {k: v for k, v in want.items() if k != "loss"}
    assert cli.main([*_cfg(tmp_path), "--control", "--format", "table"]) == 0
    assert "Same-base unscaled control: mean loss" in capsys.readouterr().out


def test_observe_band_is_used_and_recorded(tmp_path, capsys):
    assert cli.main([*_cfg(tmp_path), "--band", "0.5,2", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)["report"]
    assert report["band"] == [0.5, 2.0] and report["within_band"] is False
    for bad in ("2,1", "x", "1", "nan,1"):
        with pytest.raises(SystemExit) as info:
            cli.main([*_cfg(tmp_path), "--band", bad])
        assert info.value.code == 2
        assert "--band expects LOW,HIGH" in capsys.readouterr().err


def test_output_writes_the_document_to_a_file(tmp_path, capsys):
    out = tmp_path / "observed.json"
    assert cli.main([*_cfg(tmp_path), "--format", "json", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and f"wrote {out}" in captured.err
    assert json.loads(out.read_text())["report"]["within_band"] is True
    assert cli.main(["demo", "--format", "table", "--output", str(tmp_path / "demo.txt")]) == 0
    assert "Narrow decoder, eight complete blocks" in (tmp_path / "demo.txt").read_text()


def test_unbuilt_source_tree_gets_a_clear_message(tmp_path):
    # a checkout without the compiled core: pyproject.toml and the Python sources only
    shutil.copy(SOURCE / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(SOURCE / "pydepth", tmp_path / "pydepth",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", "*.c"))
    run = subprocess.run([sys.executable, "-m", "pydepth", "demo"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert "pydepth: error: pydepth's compiled core (the extensions in pydepth._native) is missing" in run.stderr
    assert "pip install ." in run.stderr and str(tmp_path / "pydepth") in run.stderr
    run = subprocess.run([sys.executable, "-c", "import pydepth"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 1 and "ImportError: pydepth's compiled core" in run.stderr


def test_ctrl_c_ends_with_a_line_and_status_130(monkeypatch, capsys):
    import pydepth.cli.demo as demo_cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(demo_cli, "run", interrupted)
    assert cli.main(["demo"]) == 130
    assert capsys.readouterr().err == "pydepth: error: interrupted\n"


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_reader_that_goes_away_ends_the_command_quietly_with_the_sigpipe_status(fmt, tmp_path):
    # `pydepth demo | head -3`: the reading end closes before pydepth writes
    child = subprocess.Popen([sys.executable, "-m", "pydepth", "demo", "--format", fmt], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()
    err = child.stderr.read().decode()
    child.stderr.close()
    assert child.wait(timeout=120) == 141, err
    assert err == ""


def test_a_broken_pipe_other_than_stdout_is_still_reported(tmp_path):
    code = ("import sys, pydepth.cli, pydepth.cli.demo as d\n"
            "def run(args): raise BrokenPipeError(32, 'Broken pipe (a worker connection)')\n"
            "d.run = run\n"
            "sys.exit(pydepth.cli.main(['demo']))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "pydepth: error: [Errno 32] Broken pipe (a worker connection)" in done.stderr


@pytest.mark.parametrize("command", ["demo", "observe"])
def test_demo_and_observe_print_tables_by_default_and_json_when_asked(command, tmp_path, capsys):
    argv = ["demo"] if command == "demo" else _cfg(tmp_path)
    assert cli.main(argv) == 0
    table = capsys.readouterr().out
    assert "activation" in table and not table.lstrip().startswith("{")
    assert cli.main([*argv, "--format", "json"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), dict)


def test_every_subcommand_documents_the_same_exit_codes_in_its_help():
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices
    assert set(commands) == set(cli.SUBCOMMANDS)
    for name, command in commands.items():
        text = " ".join(command.format_help().split())
        assert "Exit status: 0 success; 1 a refused input or a failed check; 2 a usage error" in text, name
        assert "130 interrupted (Ctrl-C)" in text, name
