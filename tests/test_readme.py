# SPDX-License-Identifier: MIT
"""The README stays true: every ```python block runs as it stands (outside the source tree,
against the installed package), and every example it links exists."""
import pathlib
import re
import subprocess
import sys

import pytest

from conftest import extras_imported_by, need_extra

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SNIPPETS = re.findall(r"^```python\n(.*?)^```", README, flags=re.S | re.M)


def test_the_readme_has_snippets_and_a_what_you_can_do_section():
    assert len(SNIPPETS) >= 4
    assert "## What you can do" in README


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_readme_python_snippet_runs(index, tmp_path):
    code = SNIPPETS[index]
    need_extra(*extras_imported_by(code))
    script = tmp_path / f"readme_snippet_{index}.py"  # as a user saves it: a file, not python -c
    script.write_text(code)
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, f"snippet {index}:\n{code}\n{run.stderr}"


def test_linked_examples_exist():
    links = re.findall(r"\]\((examples/[^)]+)\)", README)
    assert links
    for link in links:
        assert (ROOT / link).is_file(), link


def test_every_what_you_can_do_task_has_a_snippet_and_links_its_example():
    section = README.split("## What you can do", 1)[1].split("\n## ", 1)[0]
    tasks = re.split(r"^### ", section, flags=re.M)[1:]
    titles = [t.splitlines()[0] for t in tasks]
    assert len(tasks) >= 6, titles  # chapter, own config, train, compare, torch, sweep
    for title, body in zip(titles, tasks):
        assert "```python\n" in body, f"task {title!r} has no python snippet"
        assert re.search(r"\]\(examples/[^)]+\.py\)", body), f"task {title!r} links no example"
