# SPDX-License-Identifier: MIT
"""Every script in examples/ runs as a user would run it (outside the source tree), prints what a
person reads (no JSON dump on stdout), and writes JSON and plots to files when asked."""
import json
import pathlib
import subprocess
import sys

import pytest

from conftest import extras_imported_by, missing_extra, need_extra

EXAMPLES = sorted((pathlib.Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


def test_the_examples_are_there():
    names = {p.name for p in EXAMPLES}
    assert {"ch06_depth_stable_decoder.py", "observe_your_config.py", "compare_policies.py",
            "packed_batch_health.py", "torch_twin.py", "hf_llama_health.py", "hf_gpt2_audit.py",
            "train_tiny.py", "sweep_depth_check.py"} <= names


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_and_prints_for_people(script, tmp_path):
    source = script.read_text()
    need_extra(*extras_imported_by(source))
    args = []
    if '"--json"' in source:
        args += ["--json", str(tmp_path / "out.json")]
    if '"--plot"' in source and missing_extra("plot") is None:  # without matplotlib: no figure
        args += ["--plot", str(tmp_path / "figures")]
    run = subprocess.run([sys.executable, str(script), *args], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert 3 <= len(lines) <= 150, f"{len(lines)} lines on stdout"
    assert not any(line.lstrip().startswith(("{", '"')) for line in lines), "JSON on stdout"
    if "--json" in args:
        assert json.loads((tmp_path / "out.json").read_text())
        assert f"wrote {tmp_path / 'out.json'}" in run.stdout or "out.json" in run.stdout
    if "--plot" in args:
        (png,) = (tmp_path / "figures").glob("*.png")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
