"""Shared fixtures: the published reference figures (tests/reference/README.md)."""
import json
import pathlib

import numpy as np
import pytest

REFERENCE = pathlib.Path(__file__).parent / "reference"


@pytest.fixture(scope="session")
def reference_trace():
    """trace-public.json: bit patterns of every value the reference core produced."""
    return json.loads((REFERENCE / "trace-public.json").read_text())


@pytest.fixture(scope="session")
def published_tables():
    """published-tables.json: the chapter's six-decimal tables."""
    return json.loads((REFERENCE / "published-tables.json").read_text())


def pytest_configure(config):
    np.seterr(all="raise")


@pytest.fixture(scope="session")
def torch_models():
    """tests/torch_models.py (tiny decoders of every bridged architecture), loaded by path."""
    import importlib.util
    import sys
    name = "pydepth_tests_torch_models"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, pathlib.Path(__file__).with_name("torch_models.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
