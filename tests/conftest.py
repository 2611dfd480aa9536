# SPDX-License-Identifier: MIT
"""Shared fixtures and helpers: the published reference figures (tests/reference/README.md),
the chapter's inputs and the bit view every bit-exact check uses. Test modules import the
helpers with ``from conftest import bits, SEED, ...``."""
import ast
import importlib
import json
import os
import pathlib
import signal
import socket
import struct
import sys

import numpy as np
import pytest

REFERENCE = pathlib.Path(__file__).parent / "reference"

#: The chapter's seed, input ids and next-token targets (one segment, every position valid).
SEED = 4701
TOKENS = np.array([[0, 99, 100, 101]])
TARGETS = np.array([[99, 100, 101, 1]])


def native_binaries():
    """Every compiled file of pydepth._native: the skin's extensions and the shared core under them."""
    import pydepth._native
    here = pathlib.Path(pydepth._native.__file__).parent
    return sorted(p for p in here.iterdir() if p.suffix in (".so", ".pyd", ".dylib", ".dll"))


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


#: Each optional extra (pyproject.toml) -> the modules it brings that tests import: the one table
#: the skips read. hf also brings torch, which its own row covers.
EXTRAS = {
    "torch": ("torch",),
    "hf": ("transformers",),
    "plot": ("matplotlib",),
    "sweep": ("distributed", "pyarrow"),
    "train": ("accelerate", "lightning", "tensorboard", "wandb", "mlflow"),
    "jax": ("jax", "flax", "equinox"),
}
#: pydepth subpackages that use an extra (pydepth.torch as soon as it is imported, the others when
#: they run).
NEEDS_EXTRA = {"pydepth.torch": "torch", "pydepth.sweep": "sweep", "pydepth.plots": "plot", "pydepth.report": "plot",
               "pydepth.jax": "jax"}
#: CI installs every extra, so there a missing one is a failure; elsewhere the test skips.
EXTRAS_REQUIRED = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing_extra(*extras):
    """The skip reason for the first of ``extras`` whose modules do not import, or None."""
    for extra in extras:
        for module in EXTRAS[extra]:
            try:
                importlib.import_module(module)
            except ImportError as err:
                if EXTRAS_REQUIRED:
                    raise
                return f"needs the {extra!r} extra ({err.name or module} is missing): pip install '.[{extra}]'"
    return None


def need_extra(*extras):
    """Skips the calling test (or module, at module level) when one of ``extras`` is missing,
    naming it and its install command; under CI a missing extra raises instead."""
    reason = missing_extra(*extras)
    if reason is not None:
        pytest.skip(reason, allow_module_level=True)


def extras_imported_by(source, *, top_level_only=False):
    """The extras a Python source imports, directly or through a pydepth subpackage (only the
    module's own top-level imports with ``top_level_only``)."""
    tree = ast.parse(source)
    found = []
    for node in (tree.body if top_level_only else ast.walk(tree)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            extras = [extra for extra, modules in EXTRAS.items() if name.split(".")[0] in modules]
            extras += [extra for package, extra in NEEDS_EXTRA.items()
                       if name == package or name.startswith(package + ".")]
            found += [extra for extra in extras if extra not in found]
    return found


class _MissingExtraModule(pytest.Module):
    """A test module whose top-level imports need a missing extra: collected as one skip."""

    reason = ""

    def collect(self):
        pytest.skip(self.reason, allow_module_level=True)


def pytest_pycollect_makemodule(module_path, parent):
    """Test modules that import an extra at the top skip, naming it, when it is missing."""
    if module_path.name == "conftest.py":
        return None
    reason = missing_extra(*extras_imported_by(module_path.read_text(), top_level_only=True))
    if reason is None:
        return None
    module = _MissingExtraModule.from_parent(parent, path=module_path)
    module.reason = f"{module_path.name} {reason}"
    return module


# pytest runs with --import-mode=importlib, which does not put tests/ on sys.path
sys.modules.setdefault("conftest", sys.modules[__name__])


def pytest_configure(config):
    np.seterr(all="raise")


#: every product path's name (``PYDEPTH_KERNEL_PATH``), in the order the path tests run them
KERNEL_PATH_NAMES = ("baseline", "avx2", "avx512", "neon")


def kernel_paths():
    """The product paths this CPU runs, in ``KERNEL_PATH_NAMES`` order; the current one restored."""
    from pydepth._native import _runtime
    old = _runtime.kernel_path()
    out = [p for p in KERNEL_PATH_NAMES if _runtime.force_kernel_path(p)]
    _runtime.force_kernel_path(old)
    return out


#: the AVX-512 path's products in each of their two spellings (csrc/kernels/mul_bcast_avx512.h),
#: as (path, force_avx512_fold mode): "avx512" with separate broadcasts, "avx512-folded" with
#: broadcasts folded into the multiplies
AVX512_SPELLINGS = {"avx512": ("avx512", 0), "avx512-folded": ("avx512", 1)}


def kernel_variants():
    """``kernel_paths()`` with the AVX-512 path once per spelling of its products."""
    return [v for p in kernel_paths() for v in (AVX512_SPELLINGS if p == "avx512" else [p])]


def force_variant(variant):
    """Forces a ``kernel_variants()`` entry: its path, and the AVX-512 spelling it names (this
    CPU's own choice for the other paths). True when the path runs here."""
    from pydepth._native import _runtime
    path, fold = AVX512_SPELLINGS.get(variant, (variant, -1))
    _runtime.force_avx512_fold(fold)
    return _runtime.force_kernel_path(path)


def each_path_and_thread_count():
    """(variant, threads) for every product path this CPU runs, the AVX-512 one in both spellings
    (``kernel_variants()``), at 1 and 2 threads; path, spelling and thread count restored after."""
    import pydepth
    from pydepth._native import _runtime
    old_path, old_threads = _runtime.kernel_path(), pydepth.get_num_threads()
    try:
        for variant in kernel_variants():
            assert force_variant(variant)
            for threads in (1, 2):
                pydepth.set_num_threads(threads)
                yield variant, threads
    finally:
        _runtime.force_kernel_path(old_path)
        _runtime.force_avx512_fold(-1)
        pydepth.set_num_threads(old_threads)


def overflowing_model():
    """(model, ids, targets): a tiny embedding input and a huge unused class keep the forward
    finite while the reverse pass overflows after the head has written its contributions in place."""
    from pydepth import DecoderConfig, DecoderModel, SplitMix64
    cfg = DecoderConfig(20, 4, 1, 4, 1, 64)
    model = DecoderModel(cfg, SplitMix64(11))
    for n in ("blocks.0.attention.output.weight", "blocks.0.ffn.down.weight"):
        p = model.parameter(n)
        p.assign(p.snapshot() * 1e-6)
    ids = np.full((1, 48), 1)
    emb = model.parameter("token_embedding.weight")
    v = emb.snapshot()
    v[1] *= 1e-2
    emb.assign(v)
    fo = model.forward(ids).final_norm_output.value[0, 0]
    k = int(np.argmax(np.abs(fo)))
    v[7] = 0.0
    v[7, k] = 1e306 * np.sign(fo[k])
    emb.assign(v)
    return model, ids, np.full((1, 48), 2)


@pytest.fixture
def kernel_path_restored():
    """Restores the dispatch path a test changes."""
    from pydepth._native import _runtime
    path = _runtime.kernel_path()
    yield
    assert _runtime.force_kernel_path(path)


def load_helper(filename):
    """A helper module of tests/ (``torch_models.py``, ``jax_models.py``) loaded by path once:
    import-mode=importlib does not put tests/ on sys.path."""
    import importlib.util
    name = "pydepth_tests_" + filename.removesuffix(".py")
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, pathlib.Path(__file__).with_name(filename))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def reference_impl():
    """tests/reference_impl.py (:func:`load_helper`) computing with pydepth's elementary functions:
    the reference platform's on every platform (see reference_impl's docstring)."""
    from pydepth import elementary
    ri = load_helper("reference_impl.py")
    ri.use_elementary(exp=elementary.exp, log=elementary.log, log1p=elementary.log1p,
                      sin=elementary.sin, cos=elementary.cos, pow=elementary.pow)
    return ri


@pytest.fixture(scope="session")
def torch_models():
    """tests/torch_models.py (tiny decoders of every bridged architecture)."""
    return load_helper("torch_models.py")


# ---- shared by the `pydepth train` tests (test_train_command.py, test_train_refusals.py)

#: The small byte-level model both train test files configure.
TINY_TRAIN = {"vocabulary_size": 256, "model_width": 8, "heads": 2, "feed_forward_width": 16, "layers": 2,
              "max_positions": 16}


def write_tiny_train_config(directory):
    """TINY_TRAIN written as ``directory/tiny.json``; returns the path."""
    path = pathlib.Path(directory) / "tiny.json"
    path.write_text(json.dumps(TINY_TRAIN))
    return path


# ---- shared by the Dask cluster tests (test_sweep.py, test_sweep_lost_scheduler.py)

def free_port():
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent():
    """preexec_fn: on Linux a started process is killed when pytest dies (no stray cluster)."""
    if sys.platform.startswith("linux"):
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: workers ignore a lost parent


# ---- shared by the W&B sink tests (test_torch_callbacks.py, test_train_log_targets.py)

def _wandb_records(path):
    """Records of a W&B transaction log: a 7-byte header, then 32 KiB blocks of records
    (4-byte checksum, 2-byte length, 1-byte kind: 1 whole, 2 first, 3 middle, 4 last part)."""
    from wandb.proto import wandb_internal_pb2 as pb
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, part, records = 7, b"", []
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        _, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if left < 7 or n == kind == 0:
            pos += left
            continue
        part += data[pos + 7:pos + 7 + n]
        pos += 7 + n
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(part)
            records.append(record)
            part = b""
    return records


def wandb_history(run_dir, timeout=60.0):
    """History rows of the offline run under ``run_dir``, once its exit record is written (the
    W&B service may still be writing when ``finish`` returns)."""
    import time

    from google.protobuf.message import DecodeError
    deadline = time.monotonic() + timeout
    while True:
        logs = list(pathlib.Path(run_dir).rglob("run-*.wandb"))
        try:
            records = _wandb_records(logs[0]) if len(logs) == 1 else []
        except DecodeError:  # a record the service is still writing: read again
            records = []
        kinds = [r.WhichOneof("record_type") for r in records]
        if "exit" in kinds or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert "exit" in kinds, (logs, kinds)
    return [{"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in r.history.item}
            for r in records if r.WhichOneof("record_type") == "history"]


#: The array exp's paths, widest first, as the core's table (csrc/libm/exp_array.c).
EXP_PATHS = ("avx512-fma", "avx2-fma", "scalar")


def scalar_exp(x):
    """pd_exp of every element, one scalar call each: the array exp's reference."""
    from pydepth._native import _elementary
    out = np.empty_like(x)
    _elementary.exp_scalar_into(x, out)
    return out


def assert_same_bits(label, mine, ref, x):
    """Fails naming the first inputs where mine and ref (exps of x) differ in any bit."""
    bad = np.flatnonzero(mine.view(np.uint64) != ref.view(np.uint64))
    if bad.size:
        shown = [f"exp({float(x[i]).hex()}) = {float(mine[i]).hex()}, scalar {float(ref[i]).hex()}" for i in bad[:5]]
        pytest.fail(f"{label}: {bad.size} of {mine.size} differ:\n" + "\n".join(shown))
