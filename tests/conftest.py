"""Shared fixtures and helpers: the published reference figures (tests/reference/README.md),
the chapter's inputs and the bit view every bit-exact check uses. Test modules import the
helpers with ``from conftest import bits, SEED, ...``."""
import json
import pathlib
import sys

import numpy as np
import pytest

REFERENCE = pathlib.Path(__file__).parent / "reference"

#: The chapter's seed, input ids and next-token targets (one segment, every position valid).
SEED = 4701
TOKENS = np.array([[0, 99, 100, 101]])
TARGETS = np.array([[99, 100, 101, 1]])


def bits(a):
    """Flat uint64 view of float64 values: bit-exact checks compare these, never floats."""
    return np.ascontiguousarray(a, dtype=np.float64).reshape(-1).view(np.uint64)


def from_hex(hexes):
    """uint64 bit patterns of 16-hex-digit strings (the reference files' encoding)."""
    return np.array([int(h, 16) for h in hexes], dtype=np.uint64)


@pytest.fixture(scope="session")
def reference_trace():
    """trace-public.json: bit patterns of every value the reference core produced."""
    return json.loads((REFERENCE / "trace-public.json").read_text())


@pytest.fixture(scope="session")
def published_tables():
    """published-tables.json: the chapter's six-decimal tables."""
    return json.loads((REFERENCE / "published-tables.json").read_text())


# pytest runs with --import-mode=importlib, which does not put tests/ on sys.path
sys.modules.setdefault("conftest", sys.modules[__name__])


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
