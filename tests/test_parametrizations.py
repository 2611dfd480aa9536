# SPDX-License-Identifier: MIT
"""The table of named depth parametrizations (docs/depth-parametrizations.md): the chapter row is
today's policy in every bit, every row's factors equal the cited formulas written out here
independently, groups cover the native layout, and unknown names are refused with a typed error."""

import math
import struct

import pytest

import pydepth
from pydepth import DecoderConfig, DepthScalePolicy, ParametrizationError
from pydepth.parametrizations import (
    DEFAULT_PARAMETRIZATION,
    GROUPS,
    PARAMETRIZATIONS,
    get_parametrization,
    parameter_group,
)

DEPTHS = (1, 2, 3, 4, 8, 12, 32)
NAMES = ("chapter", "gpt2", "torchtitan", "standard", "depth-mup", "completep", "completep-0.5")


def bits(x):
    return struct.pack(">d", x).hex()


def power(L, e):
    """L**e the way the docs write it: math.pow on float64, exponent 0 exactly 1."""
    return 1.0 if e == 0 else math.pow(float(L), e)


# name -> (init(L, b), branch(L), lr[group](L), eps[group](L), wd[group](L)), from the sources' formulas
ONE = {g: (lambda L: 1.0) for g in GROUPS}
EXPECTED = {
    "chapter": (lambda L, b: 1.0 / math.sqrt(float(L)), lambda L: 1.0, ONE, ONE, ONE),
    "gpt2": (lambda L, b: 1.0 / math.sqrt(2.0 * L), lambda L: 1.0, ONE, ONE, ONE),
    "torchtitan": (lambda L, b: 1.0 / math.sqrt(2.0 * (b + 1)), lambda L: 1.0, ONE, ONE, ONE),
    "standard": (lambda L, b: 1.0, lambda L: 1.0, ONE, ONE, ONE),
    "depth-mup": (
        lambda L, b: 1.0,
        lambda L: power(L, -0.5),
        {"embedding": lambda L: 1.0, "hidden": lambda L: power(L, -0.5), "norm": lambda L: power(L, -0.5)},
        ONE,
        ONE,
    ),
    "completep": (
        lambda L, b: 1.0,
        lambda L: power(L, -1.0),
        {g: (lambda L: power(L, 1.0 - 1.0)) if g != "embedding" else (lambda L: 1.0) for g in GROUPS},
        {g: (lambda L: power(L, -1.0)) for g in GROUPS},
        ONE,
    ),
    "completep-0.5": (
        lambda L, b: 1.0,
        lambda L: power(L, -0.5),
        {"embedding": lambda L: 1.0, "hidden": lambda L: power(L, 0.5 - 1.0), "norm": lambda L: power(L, 0.5 - 1.0)},
        {g: (lambda L: power(L, -0.5)) for g in GROUPS},
        ONE,
    ),
}


def test_the_table_holds_exactly_the_contracts_names_with_chapter_the_default():
    assert tuple(PARAMETRIZATIONS) == NAMES
    assert DEFAULT_PARAMETRIZATION == "chapter"
    assert GROUPS == ("embedding", "hidden", "norm")
    for name in NAMES:
        row = get_parametrization(name)
        assert row.name == name and row.title and row.source


@pytest.mark.parametrize("L", [*DEPTHS, 2**40])
def test_the_chapter_row_is_todays_policy_factor_in_every_bit(L):
    row = get_parametrization("chapter")
    for b in {0, L // 2, L - 1}:
        assert bits(row.init_factor(L, b)) == bits(DepthScalePolicy(L).factor)
    assert row.branch_multiplier(L) == 1.0
    assert all(row.lr_factor(L, g) == row.epsilon_factor(L, g) == row.weight_decay_factor(L, g) == 1.0 for g in GROUPS)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("L", DEPTHS)
def test_every_rows_factors_equal_the_cited_formulas_bit_for_bit(name, L):
    row = get_parametrization(name)
    init, branch, lr, eps, wd = EXPECTED[name]
    for b in range(L):
        assert bits(row.init_factor(L, b)) == bits(init(L, b)), (name, L, b)
    assert bits(row.branch_multiplier(L)) == bits(branch(L))
    for g in GROUPS:
        assert bits(row.lr_factor(L, g)) == bits(lr[g](L)), (name, g)
        assert bits(row.epsilon_factor(L, g)) == bits(eps[g](L)), (name, g)
        assert bits(row.weight_decay_factor(L, g)) == bits(wd[g](L)), (name, g)


def test_the_standard_row_is_the_control_with_every_factor_one():
    row = get_parametrization("standard")
    s = row.summary(8)
    assert s["init_factors"] == [1.0] * 8 and s["branch_multiplier"] == 1.0
    assert all(v == 1.0 for k in ("lr_factors", "epsilon_factors", "weight_decay_factors") for v in s[k].values())


@pytest.mark.parametrize("bad", ["Chapter", "mup", "", None, 3, "completep-1"])
def test_an_unknown_name_is_refused_with_a_typed_error_listing_the_names(bad):
    with pytest.raises(ParametrizationError) as err:
        get_parametrization(bad)
    assert isinstance(err.value, pydepth.PydepthError)
    assert all(name in str(err.value) for name in NAMES)


def test_bad_depth_block_and_group_are_refused_with_typed_errors():
    row = get_parametrization("torchtitan")
    with pytest.raises(pydepth.ZeroDepthError):
        row.branch_multiplier(0)
    with pytest.raises(pydepth.DepthScaleError):
        row.lr_factor(-1, "hidden")
    with pytest.raises(pydepth.DepthScaleError):
        row.lr_factor(True, "hidden")
    with pytest.raises(ParametrizationError, match="block 4"):
        row.init_factor(4, 4)
    with pytest.raises(ParametrizationError, match="block"):
        row.init_factor(4, 1.0)
    with pytest.raises(ParametrizationError, match="'head'"):
        row.lr_factor(4, "head")


def test_every_native_parameter_has_a_group_and_the_outside_tensors_are_embedding():
    config = DecoderConfig(266, 8, 2, 8, 3, 8)
    groups = {name: parameter_group(name) for name, _ in config.parameter_layout()}
    assert groups["token_embedding.weight"] == groups["final_norm.gain"] == "embedding"
    assert all(g == "norm" for n, g in groups.items() if n.endswith("_norm.gain") and n.startswith("blocks."))
    assert all(g == "hidden" for n, g in groups.items() if n.endswith(".weight") and n.startswith("blocks."))
    with pytest.raises(ParametrizationError):
        parameter_group("blocks.0.attention.output.bias")


def test_the_table_cannot_be_edited():
    with pytest.raises(TypeError):
        PARAMETRIZATIONS["mine"] = PARAMETRIZATIONS["chapter"]  # type: ignore[index]
    with pytest.raises(TypeError):
        get_parametrization("completep").lr_exponents["hidden"] = 0.0  # type: ignore[index]
