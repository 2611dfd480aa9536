# SPDX-License-Identifier: MIT
"""examples/notebooks/pydepth-first-hour.ipynb runs top to bottom in a fresh kernel (outside the
source tree) without an error, every report it displays shows itself as HTML with its verdict and
an inline SVG figure, and the notebook is stored without outputs."""
import importlib
import json
import pathlib

import pytest

from conftest import EXTRAS_REQUIRED, need_extra

NOTEBOOK = pathlib.Path(__file__).resolve().parents[1] / "examples" / "notebooks" / "pydepth-first-hour.ipynb"


def _runner():
    """nbclient and nbformat, which the ``test`` extra brings (with ipykernel, the kernel)."""
    try:
        for module in ("nbclient", "nbformat", "ipykernel"):
            importlib.import_module(module)
    except ImportError as err:
        if EXTRAS_REQUIRED:
            raise
        pytest.skip(f"needs the 'test' extra ({err.name} is missing): pip install '.[test]'")
    import nbclient
    import nbformat
    return nbclient, nbformat


def test_the_notebook_is_stored_without_outputs():
    doc = json.loads(NOTEBOOK.read_text())
    code = [c for c in doc["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    cells = doc["cells"]
    assert all(cells[i - 1]["cell_type"] == "markdown" for i, c in enumerate(cells) if c["cell_type"] == "code"), \
        "each code cell follows the sentence saying what it shows"


def test_the_notebook_executes_and_every_report_shows_its_verdict_and_figure(tmp_path):
    nbclient, nbformat = _runner()
    need_extra("torch", "hf", "plot")
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()  # raises on a cell error
    shown = [o["data"]["text/html"] for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if "text/html" in o.get("data", {})]
    assert len(shown) == 4  # the fixture, the 64-block control, the Llama before and after scaling
    for page in shown:
        assert "verdict: " in page and "<table>" in page and page.count("<svg") == 1
    assert "OUTSIDE the band" in shown[1] and "every site within the band" in shown[0]
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "narrow-8" in printed and "no .grad written: True" in printed
