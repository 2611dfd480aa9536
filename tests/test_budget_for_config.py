# SPDX-License-Identifier: MIT
"""DepthInitializationBudget.for_config: exactly the budget a configuration needs."""
import pytest

from pydepth import (BudgetExceededError, DecoderConfig, DepthInitializationBudget,
                     FreshDepthInitialization, SplitMix64)

BRIDGE = DecoderConfig(266, 16, 2, 20, 2, 16)  # the chapter's CPU bridge decoder


@pytest.mark.parametrize("cfg", [BRIDGE, DecoderConfig(266, 4, 1, 4, 8, 4),
                                 DecoderConfig(64, 32, 4, 48, 4, 16, kv_heads=2)])
def test_for_config_is_exactly_the_configs_needs(cfg):
    budget = DepthInitializationBudget.for_config(cfg)
    assert budget == DepthInitializationBudget(cfg.parameter_count, cfg.max_positions)
    budget.check(cfg)
    FreshDepthInitialization.prepare(cfg, budget, SplitMix64(1))
    wider = DecoderConfig(cfg.vocabulary_size + 1, cfg.model_width, cfg.heads, cfg.feed_forward_width,
                          cfg.layers, cfg.max_positions, kv_heads=cfg.kv_heads)
    with pytest.raises(BudgetExceededError, match=f"needs {wider.parameter_count} parameters, "
                                                  f"budget allows {cfg.parameter_count}"):
        budget.check(wider)


def test_the_readme_budget_8304_is_the_cpu_bridge_decoder():
    assert DepthInitializationBudget.for_config(BRIDGE) == DepthInitializationBudget(8304, 16)


def test_for_config_refuses_a_non_config():
    with pytest.raises(TypeError, match="DecoderConfig"):
        DepthInitializationBudget.for_config({"layers": 2})
