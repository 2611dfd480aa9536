# SPDX-License-Identifier: MIT
"""The elementwise passes folded into one another keep the unfused bits: the gate product made
in the SiLU's pass, the residual adds and the SwiGLU VJP noting finiteness as they write, and
direct gradients committed right after their last writer, zero_grad split over the pool.
Shapes whose sizes are no multiple of a tile, on every kernel path, at one and two threads."""
import numpy as np
import pytest

import pydepth
from pydepth import DecoderConfig, DecoderModel, SplitMix64
from conftest import each_path_and_thread_count

# products above the unpacked threshold, edges on every side: W 72, F 200, N 70; the head's
# embedding gradient in two row blocks, the second partial (896 + 104 rows)
CFG = DecoderConfig(1000, 72, 4, 200, 2, 80)


def _ids(seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, CFG.vocabulary_size, (1, 70)), rng.integers(0, CFG.vocabulary_size, (1, 70))


def _grad_bits(model):
    return [p.grad.view(np.uint64).copy() for p in model.parameters]


def _committed(seed):
    """Two accumulated passes: the first commits in place (settling early), the second buffered."""
    model = DecoderModel(CFG, SplitMix64(4))
    for s in (seed, seed + 1):
        ids, tgt = _ids(s)
        model.loss(ids, tgt).backward()
        if s == seed:
            first = _grad_bits(model)
    return first, _grad_bits(model)


def _waited(seed):
    """The same passes through the waiting path, whose commit checks every gradient itself."""
    model = DecoderModel(CFG, SplitMix64(4))
    out = []
    for s in (seed, seed + 1):
        ids, tgt = _ids(s)
        loss = model.loss(ids, tgt)
        loss._reverse([], commit=False)
        loss._commit()
        out.append(_grad_bits(model))
    return out[0], out[1]


def test_gradients_committed_early_have_the_bits_of_the_waiting_pass_on_every_path_and_thread_count():
    want = None
    for path, threads in each_path_and_thread_count():
        got = _committed(1)
        for a, b in zip(got, _waited(1)):
            assert all(np.array_equal(x, y) for x, y in zip(a, b)), (path, threads)
        if want is None:
            want = got
        for a, b in zip(got, want):
            assert all(np.array_equal(x, y) for x, y in zip(a, b)), (path, threads)


def _bits(value):
    return np.ascontiguousarray(value, dtype=np.float64).view(np.uint64)


def test_the_fused_forward_passes_give_each_value_its_own_operation_on_every_path_and_thread_count():
    ids, _ = _ids(2)
    for path, threads in each_path_and_thread_count():
        fwd = DecoderModel(CFG, SplitMix64(5)).forward(ids)
        for b in range(CFG.layers):
            v = {k: fwd.named(f"blocks.{b}.{k}").value for k in
                 ("ffn.gate_silu", "ffn.up", "ffn.product", "attention.output", "after_attention",
                  "ffn.output", "output")}
            site = fwd.named("embedding.output" if b == 0 else f"blocks.{b - 1}.output").value
            assert np.array_equal(_bits(v["ffn.product"]), _bits(v["ffn.gate_silu"] * v["ffn.up"])), (path, threads)
            assert np.array_equal(_bits(v["after_attention"]), _bits(site + v["attention.output"])), (path, threads)
            assert np.array_equal(_bits(v["output"]), _bits(v["after_attention"] + v["ffn.output"])), (path, threads)


def test_the_gate_silu_adjoint_is_made_only_when_asked_for_and_the_gradients_do_not_depend_on_it():
    ids, tgt = _ids(3)
    for path, threads in each_path_and_thread_count():
        plain, asked = DecoderModel(CFG, SplitMix64(6)), DecoderModel(CFG, SplitMix64(6))
        plain.loss(ids, tgt).backward()
        fwd = asked.forward(ids)
        wanted = [fwd.named(f"blocks.1.ffn.{k}") for k in ("gate_silu", "product")]
        d_gs, d_pr = fwd.loss(tgt).backward_with_selected_adjoints(wanted)
        up = fwd.named("blocks.1.ffn.up").value
        assert np.array_equal(_bits(d_gs), _bits(d_pr * up)), (path, threads)
        for a, b in zip(_grad_bits(plain), _grad_bits(asked)):
            assert np.array_equal(a, b), (path, threads)


def _overflowing(gate, up):
    model = DecoderModel(CFG, SplitMix64(2))
    for name, val in (("blocks.1.ffn.gate.weight", gate), ("blocks.1.ffn.up.weight", up)):
        if val is not None:
            p = model.parameter(name)
            v = p.snapshot()
            v[:] = val
            p.assign(v)
    return model


@pytest.mark.parametrize("gate, up, node", [(None, 1.7e308, "blocks.1.ffn.up"),
                                            (1e200, 1e200, "blocks.1.ffn.product")])
def test_a_non_finite_value_of_the_fused_pass_is_named_in_the_order_of_the_checks(gate, up, node):
    """up checked after the gate's SiLU and before the product, as §5.5 orders them."""
    ids, _ = _ids(0)
    for path, threads in each_path_and_thread_count():
        with pytest.raises(pydepth.NonFiniteError) as err:
            _overflowing(gate, up).forward(ids)
        assert f" in {node} at flat index " in str(err.value), (path, threads)


def _weight_gradient_overflowing():
    """Every attention-norm output is +-1.7e308 (equal-magnitude embeddings, a huge gain, the
    projections scaled down to keep the forward finite): the value weight's gradient overflows
    while the pass writes it straight into a +0.0 gradient."""
    model = DecoderModel(DecoderConfig(20, 4, 1, 4, 1, 16), SplitMix64(11))
    gain = 1.7e308
    scale = {"token_embedding.weight": lambda v: np.sign(v) * 0.5,
             "blocks.0.attention_norm.gain": lambda v: np.full_like(v, gain)}
    for n in ("query", "key", "value"):
        scale[f"blocks.0.attention.{n}.weight"] = lambda v: v / gain
    for name, f in scale.items():
        p = model.parameter(name)
        with np.errstate(under="ignore"):
            p.assign(f(p.snapshot()))
    return model, np.full((1, 16), 1), np.full((1, 16), 2)


def test_a_weight_gradient_committed_early_that_overflows_refuses_the_pass_as_the_waiting_pass_does():
    for path, threads in each_path_and_thread_count():
        model, ids, tgt = _weight_gradient_overflowing()
        with pytest.raises(pydepth.NonFiniteError) as direct:
            model.loss(ids, tgt).backward()
        assert all(not np.any(p.grad.view(np.uint64)) for p in model.parameters), (path, threads)
        assert all(p._p.grad_known_zero for p in model.parameters), (path, threads)
        loss = model.loss(ids, tgt)
        with pytest.raises(pydepth.NonFiniteError) as waited:
            loss._reverse([], commit=False)
            loss._commit()
        assert str(direct.value) == str(waited.value), (path, threads)
        assert "gradient of blocks.0.attention.value.weight" in str(direct.value)


def test_zero_grad_split_over_the_pool_leaves_every_gradient_plus_zero_and_known_zero():
    """The gradients laid end to end, cut into chunks that straddle parameters."""
    old = pydepth.get_num_threads()
    try:
        for threads in (1, 2):
            pydepth.set_num_threads(threads)
            model = DecoderModel(CFG, SplitMix64(8))
            assert model.parameter_count > 2 * 65536
            rng = np.random.default_rng(threads)
            for p in model.parameters:
                grads = np.where(rng.random(p.size) < 0.5, -0.0, rng.standard_normal(p.size))
                p._p.restore(p.snapshot().reshape(-1), grads, p.revision)
            assert not any(p._p.grad_known_zero for p in model.parameters)
            model.zero_grad()
            assert all(not np.any(p.grad.view(np.uint64)) for p in model.parameters), threads
            assert all(p._p.grad_known_zero for p in model.parameters), threads
    finally:
        pydepth.set_num_threads(old)


def _row_overflow(fn_row, of_max=1.4):
    """An embedding row whose logit with fn_row is about of_max times the largest double."""
    with np.errstate(over="ignore"):
        return np.sign(fn_row) * (np.finfo(float).max / np.sum(np.abs(fn_row))) * of_max


def test_non_finite_logits_are_named_at_their_first_flat_index_across_the_heads_column_blocks():
    """Row 0 overflows at column 950 (the second block of 896 columns), a later row at column 10
    (the first block): the first flat index is row 0's, found after the first block's bad value."""
    ids = np.arange(100, 170).reshape(1, 70)
    for path, threads in each_path_and_thread_count():
        model = DecoderModel(CFG, SplitMix64(9))
        fn = model.forward(ids).final_norm_output.value[0]
        # the row least aligned with row 0, so that its overflowing class leaves row 0 finite
        cross = [abs(np.sign(fn[r]) @ fn[0]) / np.abs(fn[r]).sum() for r in range(1, 70)]
        r = 1 + int(np.argmin(cross))
        assert 1.4 * cross[r - 1] < 0.5  # row 0's logit at column 10 stays far from overflow
        emb = model.parameter("token_embedding.weight")
        v = emb.snapshot()
        v[950], v[10] = _row_overflow(fn[0]), _row_overflow(fn[r])
        emb.assign(v)
        with pytest.raises(pydepth.NonFiniteError) as err:
            model.forward(ids)
        assert str(err.value).endswith("in logits at flat index 950"), (path, threads, str(err.value))


@pytest.mark.parametrize("mu", [1.0, 0.5])
@pytest.mark.parametrize(
    "weight, value, node",
    [
        ("attention.query", 1.7e308, "attention.query_heads"),
        ("attention.value", -1.7e308, "attention.value_heads"),
        ("attention.output", -1.7e308, "attention.output"),
        ("ffn.gate", 1.7e308, "ffn.gate_linear"),
        ("ffn.down", -1.7e308, "ffn.output"),
    ],
)
def test_a_value_noted_non_finite_by_the_pass_that_reads_it_is_named_as_its_own_check_names_it(
    weight, value, node, mu
):
    """The splits, the residual adds and the SiLU pass note the finiteness of the values they read;
    the failure still names the value and its first flat index in its own layout."""
    ids = np.arange(100, 170).reshape(1, 70)
    for path, threads in each_path_and_thread_count():
        model = DecoderModel(CFG, SplitMix64(2), branch_multipliers=mu)
        p = model.parameter(f"blocks.1.{weight}.weight")
        p.assign(np.full(p.shape, value))
        with pytest.raises(pydepth.NonFiniteError) as err:
            model.forward(ids)
        msg = str(err.value)
        assert f" in blocks.1.{node} at flat index " in msg, (path, threads, msg)


def test_the_weight_rows_vector_loops_keep_the_bits_and_the_failure_on_segmented_padded_rows():
    """Segments starting inside a row and padding: the scaled, shifted and divided weights and
    their VJP, and a score overflow named at one flat index on every path and thread count."""
    rng = np.random.default_rng(4)
    srcs = [rng.integers(0, CFG.vocabulary_size, n) for n in (31, 25, 40, 9)]
    batch = pydepth.Batch.pack(srcs, 60)
    want, named = None, set()
    for path, threads in each_path_and_thread_count():
        model = DecoderModel(CFG, SplitMix64(12))
        fwd = model.forward(batch)
        got = [_bits(fwd.named(f"blocks.{b}.attention.weights").value) for b in range(CFG.layers)]
        fwd.loss().backward()
        got += _grad_bits(model)
        if want is None:
            want = got
        assert all(np.array_equal(x, y) for x, y in zip(got, want)), (path, threads)
        for name in ("query", "key"):
            p = model.parameter(f"blocks.1.attention.{name}.weight")
            p.assign(np.full(p.shape, 1e160))
        with pytest.raises(pydepth.NonFiniteError) as err:
            model.forward(batch)
        named.add(str(err.value))
    assert len(named) == 1 and " in blocks.1.attention scores at flat index " in named.pop()
