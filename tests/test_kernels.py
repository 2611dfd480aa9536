# SPDX-License-Identifier: MIT
"""The C matmul kernels and thread pool: bit-identical to the sequential reference order for
every shape, dispatch path and thread count; no FMA instruction in the built extension."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import pydepth as pd
from pydepth._native import _runtime, _testing
from conftest import (KERNEL_PATH_NAMES, bits, each_path_and_thread_count, force_variant, kernel_variants,
                      native_binaries)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

PATHS = KERNEL_PATH_NAMES
REFERENCE = Path(__file__).parent / "reference" / "trace-public.json"


AVAILABLE = kernel_variants()  # every path, the AVX-512 one in both spellings of its products


@pytest.fixture
def kernel_state():
    """Restores the dispatch path and thread count a test changes."""
    path, threads = _runtime.kernel_path(), pd.get_num_threads()
    yield
    assert _runtime.force_kernel_path(path)
    _runtime.force_avx512_fold(-1)
    pd.set_num_threads(threads)


def operands(kind, m, k, n, rng):
    a = rng.standard_normal((k, m) if kind == "tn" else (m, k))
    b = rng.standard_normal((n, k) if kind == "nt" else (k, n))
    return a, b


def reference(kind, a, b, c0, acc):
    """s = 0.0; s = s + a[:, k] * b[k, :] for k ascending, then C + s: numpy's elementwise
    float64 multiply and add are single rounded operations, so this is the exact order."""
    lhs = a.T if kind == "tn" else a
    rhs = b.T if kind == "nt" else b
    s = np.zeros((lhs.shape[0], rhs.shape[1]))
    for k in range(lhs.shape[1]):
        s = s + lhs[:, k:k + 1] * rhs[k:k + 1, :]
    return c0 + s if acc else s


def run(kind, a, b, c0, acc):
    c = c0.copy()
    _testing.matmul(kind, a, b, c, acc)
    return c


RAGGED = [1, 2, 3, 17, 129, 513]
SHAPES = [(1, 1, 1), (4, 4, 4), (3, 17, 2), (17, 129, 513), (129, 513, 17), (513, 3, 129),
          (2, 513, 3), (129, 129, 129), (17, 300, 70), (7, 700, 9), (64, 600, 513),
          (64, 64, 63), (64, 64, 64), (16, 16, 266), (266, 16, 16)]  # both sides of the packing threshold


@pytest.mark.parametrize("path", AVAILABLE)
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("kind", ["nn", "nt", "tn"])
def test_matmul_bit_exact(kernel_state, path, threads, kind):
    assert force_variant(path)
    pd.set_num_threads(threads)
    rng = np.random.default_rng(hash((path, threads, kind)) % 2**32)
    for m, k, n in SHAPES:
        a, b = operands(kind, m, k, n, rng)
        c0 = rng.standard_normal((m, n))
        for acc in (False, True):
            got = run(kind, a, b, c0, acc)
            want = reference(kind, a, b, c0, acc)
            assert np.array_equal(bits(got), bits(want)), (path, threads, kind, m, k, n, acc)


@pytest.mark.parametrize("kind", ["nn", "nt", "tn"])
def test_matmul_special_values(kernel_state, kind):
    """Signed zeros, cancellation to zero, huge and tiny magnitudes."""
    rng = np.random.default_rng(5)
    m, k, n = 33, 300, 41
    for path in AVAILABLE:
        assert force_variant(path)
        for threads in (1, 2):
            pd.set_num_threads(threads)
            a, b = operands(kind, m, k, n, rng)
            a[a > 1.0] = -0.0
            b[b < -1.2] = 0.0
            a.flat[::7] *= 1e300
            b.flat[::5] *= 1e-300
            c0 = np.where(rng.random((m, n)) < 0.5, -0.0, 0.0)
            for acc in (False, True):
                got = run(kind, a, b, c0, acc)
                want = reference(kind, a, b, c0, acc)
                assert np.array_equal(bits(got), bits(want)), (path, threads, acc)


# Unpacked small products (gemm_small*.c): row tiles of 4 (AVX2) and 8 (AVX-512), column
# vectors of 4 and 8 in pairs, masked or scalar right edges; every edge of each on each side.
SMALL_M = (1, 3, 4, 5, 7, 8, 9, 17)
SMALL_N = (1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 20, 23, 24, 33)
SMALL_K = (1, 2, 16, 33)


@pytest.mark.parametrize("path", AVAILABLE)
@pytest.mark.parametrize("kind", ["nn", "nt", "tn"])
def test_small_products_bit_exact_at_every_tile_edge(kernel_state, path, kind):
    assert force_variant(path)
    rng = np.random.default_rng(sum(map(ord, path + kind)))
    for m in SMALL_M:
        for k in SMALL_K:
            for n in SMALL_N:
                a, b = operands(kind, m, k, n, rng)
                a[rng.random(a.shape) < 0.2] = -0.0  # products of -0.0: the sum starts at +0.0
                c0 = np.where(rng.random((m, n)) < 0.3, -0.0, rng.standard_normal((m, n)))
                for acc in (False, True):
                    got = run(kind, a, b, c0, acc)
                    want = reference(kind, a, b, c0, acc)
                    assert np.array_equal(bits(got), bits(want)), (path, kind, m, k, n, acc)


# Every unpacked shape up to 40 on each side (gemm_small*.c, the AVX-512 k-major copy's masked
# edge blocks, and AVX-512's transposed stores for an nt product with M < N). One reference per
# K on 40 x 40 operands serves every smaller product: a corner's outputs sum the same terms in
# the same order.
SWEEP = 40


@pytest.mark.parametrize("kind", ["nn", "nt", "tn"])
def test_small_products_bit_exact_at_every_shape_up_to_40_on_every_path_and_thread_count(kernel_state, kind):
    rng = np.random.default_rng(sum(map(ord, kind)) + SWEEP)
    for k in range(1, SWEEP + 1):
        a, b = operands(kind, SWEEP, k, SWEEP, rng)
        a[rng.random(a.shape) < 0.1] = -0.0  # products of -0.0: each sum starts at +0.0
        c0 = np.where(rng.random((SWEEP, SWEEP)) < 0.2, -0.0, rng.standard_normal((SWEEP, SWEEP)))
        s = reference(kind, a, b, c0, False)
        corners = [(m, n) for m in range(1, SWEEP + 1) for n in range(1, SWEEP + 1)]
        a_of = {m: np.ascontiguousarray(a[:, :m] if kind == "tn" else a[:m]) for m in range(1, SWEEP + 1)}
        b_of = {n: np.ascontiguousarray(b[:n] if kind == "nt" else b[:, :n]) for n in range(1, SWEEP + 1)}
        for path, threads in each_path_and_thread_count():
            for m, n in corners:
                for acc in (False, True):
                    got = run(kind, a_of[m], b_of[n], np.ascontiguousarray(c0[:m, :n]), acc)
                    want = c0[:m, :n] + s[:m, :n] if acc else s[:m, :n]
                    assert np.array_equal(bits(got), bits(want)), (path, threads, kind, m, k, n, acc)


# Packed products with a transposed operand (transpose*.c): panels of 16 (AVX-512) and 8 (AVX2)
# lanes moved in 8x8 / 4x4 register blocks, partial panels and k remainders by the portable
# gather; k-blocks of 256 terms (512 on AVX-512), so 603 terms give three (two) blocks ending in
# a ragged one.
PACKED_T = [(37, 603, 83), (83, 603, 37), (6, 517, 113), (101, 263, 16), (48, 771, 61)]


@pytest.mark.parametrize("path", AVAILABLE)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind", ["nt", "tn"])
def test_packed_transposed_operands_bit_exact_at_panel_and_block_edges(kernel_state, path, threads, kind):
    assert_packed_products_bit_exact(path, threads, kind, PACKED_T, threads, zeros_in="b")


def assert_packed_products_bit_exact(path, threads, kind, shapes, seed, zeros_in):
    """Each packed product of shapes, acc off and on, against the reference order's bits; a
    tenth of operand zeros_in ("a" or "b") set to -0.0."""
    assert force_variant(path)
    pd.set_num_threads(threads)
    rng = np.random.default_rng(sum(map(ord, path + kind)) + seed)
    for m, k, n in shapes:
        assert m * k * n >= 1 << 18  # above the unpacked threshold: the packed path runs
        a, b = operands(kind, m, k, n, rng)
        signed = a if zeros_in == "a" else b
        signed[rng.random(signed.shape) < 0.1] = -0.0
        c0 = rng.standard_normal((m, n))
        for acc in (False, True):
            got = run(kind, a, b, c0, acc)
            want = reference(kind, a, b, c0, acc)
            assert np.array_equal(bits(got), bits(want)), (path, threads, kind, m, k, n, acc)


# Row-major A read in place (gemm.c): up to 128 rows whose stride is under a page (512
# doubles) form one row block, past the SIMD paths' mc of 96 rows; partial last slivers,
# ragged k-blocks and partial panels inside that block; 104 x 520 keeps the path's mc.
TALL_BLOCK = [(120, 300, 40), (128, 128, 48), (104, 520, 33), (125, 40, 600)]


@pytest.mark.parametrize("path", AVAILABLE)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind", ["nn", "nt"])
def test_row_major_a_in_one_tall_row_block_bit_exact_on_every_path(kernel_state, path, threads, kind):
    assert_packed_products_bit_exact(path, threads, kind, TALL_BLOCK, 7 * threads, zeros_in="a")


# The packing copies of each path (pack.c, transpose*.c): one dimension swept from 1 to 40
# across the register tiles (4, 6, 8 rows; 4, 8, 16 columns) while the other two keep the
# product packed (M*K*N >= 2^18), with K = 530 giving two full k-blocks of 256 (one of 512 on
# AVX-512) and a ragged one.
PACK_EDGE = range(1, 41)
PACK_SWEEPS = {"m": lambda d: (d, 530, 521), "n": lambda d: (521, 530, d), "k": lambda d: (513, d, 520)}


@pytest.mark.parametrize("sweep", sorted(PACK_SWEEPS))
@pytest.mark.parametrize("kind", ["nn", "nt", "tn"])
def test_every_path_packs_the_same_bits_at_each_edge_of_its_panels_and_slivers(kernel_state, sweep, kind):
    rng = np.random.default_rng(sum(map(ord, sweep + kind)))
    for d in PACK_EDGE:
        m, k, n = PACK_SWEEPS[sweep](d)
        assert m * k * n >= 1 << 18  # above the unpacked threshold: the packed path runs
        a, b = operands(kind, m, k, n, rng)
        b[rng.random(b.shape) < 0.1] = -0.0
        c0 = rng.standard_normal((m, n))
        want = {acc: bits(reference(kind, a, b, c0, acc)) for acc in (False, True)}
        for path in AVAILABLE:
            assert force_variant(path)
            for threads in (1, 2):
                pd.set_num_threads(threads)
                for acc in (False, True):
                    got = bits(run(kind, a, b, c0, acc))
                    assert np.array_equal(got, want[acc]), (path, threads, kind, m, k, n, acc)


def test_small_products_start_each_sum_at_positive_zero(kernel_state):
    """All terms -0.0: the sum is +0.0 (a kernel seeding with the first product would give -0.0)."""
    for path in AVAILABLE:
        assert force_variant(path)
        for kind in ("nn", "nt", "tn"):
            a, b = operands(kind, 9, 3, 17, np.random.default_rng(1))
            a[:], b[:] = -0.0, 1.0
            got = run(kind, a, b, np.full((9, 17), 7.0), False)
            assert np.array_equal(bits(got), bits(np.zeros((9, 17)))), (path, kind)


def test_matmul_empty_inner_dimension(kernel_state):
    """K = 0: every sum is the initial +0.0 (acc mode: C + 0.0)."""
    c0 = np.full((3, 4), -0.0)
    for kind in ("nn", "nt", "tn"):
        empty_a, empty_b = operands(kind, 3, 0, 4, np.random.default_rng(0))
        try:
            run(kind, empty_a, empty_b, c0, False)
        except (IndexError, ValueError):
            pytest.skip("the test binding cannot pass empty operands")
        assert np.array_equal(bits(run(kind, empty_a, empty_b, c0, False)), bits(np.zeros((3, 4))))
        assert np.array_equal(bits(run(kind, empty_a, empty_b, c0, True)), bits(c0 + 0.0))


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["nn", "nt", "tn"]), m=st.sampled_from(RAGGED),
       k=st.sampled_from([*RAGGED, 257, 1100]), n=st.sampled_from(RAGGED),
       acc=st.booleans(), threads=st.sampled_from([1, 2, 3]),
       path=st.sampled_from(AVAILABLE), seed=st.integers(0, 2**32 - 1))
def test_matmul_random_shapes(kind, m, k, n, acc, threads, path, seed):
    old_path, old_threads = _runtime.kernel_path(), pd.get_num_threads()
    try:
        assert force_variant(path)
        pd.set_num_threads(threads)
        rng = np.random.default_rng(seed)
        a, b = operands(kind, m, k, n, rng)
        c0 = rng.standard_normal((m, n))
        assert np.array_equal(bits(run(kind, a, b, c0, acc)), bits(reference(kind, a, b, c0, acc)))
    finally:
        _runtime.force_kernel_path(old_path)
        _runtime.force_avx512_fold(-1)
        pd.set_num_threads(old_threads)


def test_dispatch_names(kernel_state):
    assert _runtime.kernel_path() in PATHS
    assert "baseline" in AVAILABLE
    assert not _runtime.force_kernel_path("no-such-path")
    for p in PATHS:
        ok = _runtime.force_kernel_path(p)
        assert ok == (p in AVAILABLE)
        if ok:
            assert _runtime.kernel_path() == p


def _cpuinfo_avx512_half_width():
    """AMD family 19h (Zen 4) with AVX-512F, read from /proc/cpuinfo; None where it is absent."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.split("\n\n")[0].splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    if "vendor_id" not in fields or "cpu family" not in fields:
        return None  # not an x86 CPU's page
    return (fields["vendor_id"] == "AuthenticAMD" and fields["cpu family"] == "25"
            and "avx512f" in fields.get("flags", "").split())


def test_the_avx512_products_fold_their_broadcasts_exactly_where_avx512_runs_at_half_width(kernel_state):
    expected = _cpuinfo_avx512_half_width()
    if expected is None:
        pytest.skip("no x86 /proc/cpuinfo to compare the CPUID reading with")
    _runtime.force_avx512_fold(-1)
    assert _runtime.avx512_folds() == expected
    for mode in (1, 0):
        _runtime.force_avx512_fold(mode)
        assert _runtime.avx512_folds() == bool(mode)


def test_threads_from_python_threads(kernel_state):
    """Several Python threads may drive the pool at once; each result is still exact."""
    from concurrent.futures import ThreadPoolExecutor
    pd.set_num_threads(2)
    rng = np.random.default_rng(11)
    jobs = []
    for i in range(6):
        kind = ("nn", "nt", "tn")[i % 3]
        a, b = operands(kind, 130, 200, 140, rng)
        jobs.append((kind, a, b, rng.standard_normal((130, 140)), bool(i % 2)))
    wants = [reference(*j) for j in jobs]
    with ThreadPoolExecutor(4) as ex:
        gots = list(ex.map(lambda j: run(*j), jobs * 3))
    for i, got in enumerate(gots):
        assert np.array_equal(bits(got), bits(wants[i % len(jobs)]))


# ---- the whole decoder under every thread count and path ------------------------------

def _ref_bits(hexes):
    return np.array([int(x, 16) for x in hexes], dtype=np.uint64)


def _check_fixture(fx):
    """Mismatch descriptions for one trace fixture (both parameter variants)."""
    bad = []
    cfg = pd.DecoderConfig.from_dict(fx["config"])
    base = pd.DecoderModel(cfg, pd.SplitMix64(fx["seed"]))
    factor = 1.0 / np.sqrt(float(cfg.layers)) if cfg.layers else 1.0
    for variant in ("same_base_unscaled_control", "initialized"):
        params = []
        for p in base.parameters:
            v = p.snapshot()
            if variant == "initialized" and cfg.layers != 1 and (
                    p.name.endswith("attention.output.weight") or p.name.endswith("ffn.down.weight")):
                v = v * factor
            params.append(pd.NamedParameter(p.name, v))
        m = pd.DecoderModel.from_parameters(cfg, params)
        tr = fx[variant]
        B, T = fx["token_shape"]
        toks = np.array(fx["tokens"]).reshape(B, T)
        tgts = np.array(fx["targets"]).reshape(B, T)
        fwd = m.forward(toks)
        loss = fwd.loss(tgts)
        for q in tr["forward"]:
            v = loss.value if q["name"] == "loss" else fwd.named(q["name"]).value
            if list(np.shape(v)) != q["shape"] or not np.array_equal(bits(v).reshape(-1), _ref_bits(q["bits"])):
                bad.append((variant, "forward", q["name"]))
        adjs = loss.backward_with_selected_adjoints(list(fwd.residual_sites))
        for q, a in zip(tr["site_adjoints"], adjs):
            if not np.array_equal(bits(a).reshape(-1), _ref_bits(q["bits"])):
                bad.append((variant, "adjoint", q["name"]))
        for p, q in zip(m.parameters, tr["parameter_gradients"]):
            if p.name != q["name"] or not np.array_equal(bits(p.grad).reshape(-1), _ref_bits(q["bits"])):
                bad.append((variant, "gradient", q["name"]))
    return bad


@pytest.mark.skipif(not REFERENCE.exists(), reason="reference trace missing")
@pytest.mark.parametrize("path", AVAILABLE)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_decoder_trace_any_threads_and_path(kernel_state, path, threads):
    assert force_variant(path)
    pd.set_num_threads(threads)
    data = json.loads(REFERENCE.read_text())
    for fx in data["fixtures"]:
        assert _check_fixture(fx) == [], fx["id"]


@pytest.mark.parametrize("config,batch,length", [
    ((300, 48, 4, 72, 2, 80), 3, 80),
    # 640 rows: the norm gains' column sums split over the threads too
    ((64, 64, 4, 96, 1, 320), 2, 320)])
def test_decoder_larger_shape_thread_invariant(kernel_state, config, batch, length):
    """A shape large enough for the blocked, threaded kernels: identical bits for any setting."""
    cfg = pd.DecoderConfig(*config, kv_heads=2)
    V = config[0]
    rng = np.random.default_rng(3)
    toks = rng.integers(0, V, size=(batch, length))
    tgts = rng.integers(0, V, size=(batch, length))
    results = []
    for path in AVAILABLE:
        for threads in (1, 2, 3):
            assert force_variant(path)
            pd.set_num_threads(threads)
            m = pd.DecoderModel(cfg, pd.SplitMix64(99))
            fwd = m.forward(toks)
            loss = fwd.loss(tgts)
            loss.backward()
            results.append([bits(fwd.logits.value).copy(), bits(loss.value).copy()]
                           + [bits(p.grad).copy() for p in m.parameters])
    for r in results[1:]:
        for x, y in zip(results[0], r):
            assert np.array_equal(x, y)


# ---- no fused multiply-add anywhere in the extension ----------------------------------

FMA = re.compile(r"\bv?f(n)?m(add|sub)(sub|add)?\d{3}[ps][sd]\b|\bvfn?m(add|sub)\w*")


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")
def test_no_fma_instructions():
    out = "".join(subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(so)], capture_output=True,
                                 text=True, check=True).stdout for so in native_binaries())
    assert "vmulpd" in out or "mulsd" in out  # sanity: we did disassemble code
    # the one place fused operations are written on purpose: the FMA builds of the elementary
    # functions, named pd_libm_fma_*, which fuse where the reference libm does
    # (docs/numerics-elementary.md)
    hits, function = [], None
    for line in out.splitlines():
        label = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if label:
            function = label.group(1).split("@")[0]
        elif FMA.search(line) and not (function or "").startswith("pd_libm_fma_"):
            hits.append(f"{function}: {line.strip()}")
    assert hits == [], hits[:10]
    # the AVX2 micro-kernel is in there and uses separate multiplies and adds
    assert re.search(r"vmulpd\s+%ymm", out) and re.search(r"vaddpd\s+%ymm", out)
    if os.environ.get("PYDEPTH_EXPECT_AVX512"):
        assert re.search(r"vmulpd\s+%zmm", out)
