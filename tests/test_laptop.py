# SPDX-License-Identifier: MIT
"""`pydepth laptop` at a reduced size: the same code path as the 32.5M-parameter plan."""
import json
import subprocess
import sys
import gc
import weakref

import numpy as np

import pydepth
from pydepth.chapter.laptop import PLAN, deterministic_batch, plan_config

SMALL = ["--vocabulary-size", "97", "--model-width", "16", "--layers", "3", "--heads", "4",
         "--kv-heads", "2", "--feed-forward-width", "24", "--max-positions", "20", "--sequence-length", "20"]


def test_plan_is_the_chapters():
    cfg = plan_config()
    assert cfg.parameter_count == 32_514_560
    assert (cfg.heads, cfg.kv_heads, cfg.layers, cfg.max_positions) == (8, 2, 8, 512)
    assert PLAN["feed_forward_width"] == 1536


def test_reduced_laptop_json_with_control(tmp_path):
    # cwd outside the source tree, so the installed package (with its C core) is imported
    out = subprocess.run([sys.executable, "-m", "pydepth", "laptop", *SMALL, "--control", "--format", "json"],
                         check=True, capture_output=True, text=True, cwd=tmp_path)
    doc = json.loads(out.stdout)
    cfg = plan_config({"vocabulary_size": 97, "model_width": 16, "layers": 3, "heads": 4, "kv_heads": 2,
                       "feed_forward_width": 24, "max_positions": 20})
    assert doc["parameter_count"] == cfg.parameter_count
    assert [r["label"] for r in doc["runs"]] == ["initialized", "same_base_unscaled_control"]
    assert doc["record"]["transformed_tensors"] == 6
    assert doc["peak_rss_mib"] > 0
    # the run is the documented deterministic batch through the depth-initialized model
    rng = pydepth.SplitMix64(4701)
    fresh = pydepth.FreshDepthInitialization.prepare(
        cfg, pydepth.DepthInitializationBudget(cfg.parameter_count, cfg.max_positions), rng)
    model = fresh.complete().model
    ids, tgt = deterministic_batch(cfg, 20)
    assert doc["runs"][0]["loss"] == model.loss(ids, tgt).item()
    report = doc["runs"][0]["report"]
    assert len(report["sites"]) == 7
    assert "progress" not in out.stdout and "forward" in out.stderr  # progress goes to stderr


def test_reduced_laptop_table(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pydepth", "laptop", *SMALL], check=True,
                         capture_output=True, text=True, cwd=tmp_path)
    assert "block.2.after_feed_forward" in out.stdout
    assert "peak resident memory" in out.stdout


def test_forward_records_are_freed_without_the_cycle_collector():
    model = pydepth.DecoderModel(pydepth.DecoderConfig(11, 4, 1, 4, 2, 4), pydepth.SplitMix64(1))
    gc.disable()
    try:
        fwd = model.forward(np.array([[1, 2, 3]]))
        loss = fwd.loss(np.array([[2, 3, 4]]))
        _ = [fwd.blocks[0].output, fwd.residual_sites, fwd.logits.value]
        ref = weakref.ref(fwd)
        del fwd, loss, _
        assert ref() is None
    finally:
        gc.enable()
