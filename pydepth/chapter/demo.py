# SPDX-License-Identifier: MIT
"""The chapter 6 demo: worked coefficients, four seeded fixtures (depth-initialized and
same-base unscaled control), synthetic classifier arrays and the symbolic laptop plan.

Budget profiles: ``reference-ci`` admits exactly the one-block narrow decoder
(1188 parameters, 4 positions); ``cpu-bridge`` (8304 parameters, 16 positions) admits the
two- and eight-block narrow decoders and, exactly, the CPU bridge decoder. Each fixture uses
the smallest profile that admits it, so the budget edge is exercised on both profiles.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from .._native._bits import float_bits
from .._native._rng import SplitMix64
from ..config import DecoderConfig
from ..depth_init import (DepthInitializationBudget, DepthScalePolicy, FreshDepthInitialization)
from ..errors import PydepthError
from ..health import (HEALTH_BAND, DepthHealthReport, classify_ratio, format_table, observe_residual_health,
                      site_table)
from ..xavier import xavier_scale
from .laptop import LAPTOP_CONFIG  # the symbolic laptop decoder (never allocated here)
from ..model import DecoderModel, NamedParameter

__all__ = ["DEMO_FORMAT", "SEED", "TOKENS", "TARGETS", "PROFILES", "FIXTURES", "DemoCheckError", "demo_trace",
           "worked_values", "fixture", "synthetic_classifiers", "laptop_plan", "demo_table",
           "LAPTOP_CONFIG"]

#: The initialization seed of every fixture.
SEED = 4701
#: The ``format`` field of the demo document (``pydepth report`` recognizes a demo output by it).
DEMO_FORMAT = "pydepth-ch06-demo-v1"
#: Source [0, 99, 100, 101, 1]: its inputs, one segment, all valid.
TOKENS: Tuple[int, ...] = (0, 99, 100, 101)
#: The next-token targets of :data:`TOKENS`.
TARGETS: Tuple[int, ...] = (99, 100, 101, 1)
#: Budget profiles: (max_parameters, max_positions).
PROFILES: Dict[str, Tuple[int, int]] = {"reference-ci": (1188, 4), "cpu-bridge": (8304, 16)}
#: (id, title, profile, config) of the executed fixtures.
FIXTURES: Tuple[Tuple[str, str, str, DecoderConfig], ...] = (
    ("narrow-1", "Narrow decoder, one complete block", "reference-ci", DecoderConfig(266, 4, 1, 4, 1, 4)),
    ("narrow-2", "Narrow decoder, two complete blocks", "cpu-bridge", DecoderConfig(266, 4, 1, 4, 2, 4)),
    ("narrow-8", "Narrow decoder, eight complete blocks", "cpu-bridge", DecoderConfig(266, 4, 1, 4, 8, 4)),
    ("bridge-2", "CPU bridge decoder, two complete blocks", "cpu-bridge", DecoderConfig(266, 16, 2, 20, 2, 16)),
)
# The chapter's selection, stated here independently of DepthScalePolicy (which owns the rule)
# so that the fixture self-check catches a policy that scales the wrong tensors.
_CHAPTER_SELECTION = (".attention.output.weight", ".ffn.down.weight")
_WORKED_VECTOR = (0.2, -0.4, 0.0, 0.1)
_WORKED_DEPTHS = (1, 2, 8)


class DemoCheckError(PydepthError):
    """A demo self-check failed: a stored transform differed, or a fixture left the band."""


def worked_values() -> Dict[str, Any]:
    """The illustrative vector [0.2, -0.4, 0, 0.1] as a selected output projection at depths
    1, 2 and 8 (actual float64 results of the once-applied factor), the unchanged query vector,
    and the ideal Xavier 4x4 half-bounds and variances after initialization."""
    selected: Dict[str, List[float]] = {}
    factors: Dict[str, float] = {}
    xavier: Dict[str, Dict[str, Any]] = {}
    base = xavier_scale(4, 4)
    vector = np.array(_WORKED_VECTOR)
    for depth in _WORKED_DEPTHS:
        policy = DepthScalePolicy(depth)
        # the vector as block 0's output projection, through the policy completion applies
        (p,) = policy.apply([NamedParameter("blocks.0.attention.output.weight", vector)])
        selected[str(depth)] = [float(v) for v in p.value]
        factors[str(depth)] = policy.factor
        xavier[str(depth)] = {
            "half_bound": f"sqrt(3/{4 * depth})", "variance": f"1/{4 * depth}",
            "half_bound_value": base.uniform_limit * policy.factor,
            "variance_value": base.target_variance * policy.factor ** 2,
        }
    unselected = NamedParameter("blocks.0.attention.query.weight", vector)
    (query,) = DepthScalePolicy(max(_WORKED_DEPTHS)).apply([unselected])
    return {"vector": list(_WORKED_VECTOR), "depths": list(_WORKED_DEPTHS), "factors": factors,
            "selected": selected, "query_vector_unchanged": [float(v) for v in query.value],
            "xavier_4x4": xavier}


def _health(model: DecoderModel) -> Tuple[float, DepthHealthReport]:
    fwd = model.forward(np.array([TOKENS], dtype=np.int64))
    loss = fwd.loss(np.array([TARGETS], dtype=np.int64))
    report = observe_residual_health(model, fwd, loss)
    return loss.item(), report


def _report_json(loss: float, report: DepthHealthReport) -> Dict[str, Any]:
    out = {"loss": loss}
    out.update(report.to_dict())
    return out


def fixture(fixture_id: str, title: str, profile: str, config: DecoderConfig) -> Dict[str, Any]:
    """One fixture as the chapter builds it: one preparation; an unscaled control from
    snapshots of the actual base parameters (no second draw); completion; a bitwise check of
    every stored transform; health of both models. Raises :class:`DemoCheckError` when a
    transform differs or the initialized model leaves the band."""
    max_parameters, max_positions = PROFILES[profile]
    rng = SplitMix64(SEED)
    fresh = FreshDepthInitialization.prepare(
        config, DepthInitializationBudget(max_parameters, max_positions), rng)
    control = fresh.base_model.clone()
    initialized = fresh.complete()
    scaled = initialized.model
    alpha = initialized.record.factor
    selected: List[str] = []
    unchanged = 0
    for base, actual in zip(control.parameters, scaled.parameters):
        if base.name != actual.name or base.shape != actual.shape:
            raise DemoCheckError(f"{fixture_id}: depth transform changed the parameter layout at {base.name}")
        is_selected = base.name.endswith(_CHAPTER_SELECTION)
        expected = base.value * alpha if is_selected and config.layers != 1 else base.value
        differs = np.flatnonzero(expected.view(np.uint64) != actual.value.view(np.uint64))
        if differs.size:
            raise DemoCheckError(f"{fixture_id}: selective stored-weight transform differed in "
                                 f"{base.name} at flat index {int(differs[0])}")
        if is_selected:
            selected.append(base.name)
        else:
            unchanged += 1
    scaled_loss, scaled_health = _health(scaled)
    base_loss, base_health = _health(control)
    if not scaled_health.within_band:
        raise DemoCheckError(f"{fixture_id}: fixed initialized fixture left the frozen health band")
    record = initialized.record
    return {
        "id": fixture_id, "title": title, "profile": profile,
        "budget": {"max_parameters": max_parameters, "max_positions": max_positions},
        "vocabulary": config.vocabulary_size, "width": config.model_width, "heads": config.heads,
        "kv_heads": config.kv_heads, "ff_width": config.feed_forward_width, "layers": config.layers,
        "max_positions": config.max_positions, "parameters": scaled.parameter_count,
        "parameter_tensors": len(scaled.parameters), "residual_sites": 2 * config.layers + 1,
        "factor": alpha, "factor_bits": float_bits(alpha), "policy_id": record.policy_id,
        "base_initializer_id": record.base_initializer_id,
        "initial_rng_state": str(record.initial_rng_state),
        "final_rng_state": str(record.final_rng_state),
        "transformed_tensors": record.transformed_tensors,
        "selected_names": selected, "unselected_tensors_unchanged": unchanged,
        "initialized": _report_json(scaled_loss, scaled_health),
        "same_base_unscaled_control": _report_json(base_loss, base_health),
    }


_SYNTHETIC = (("activation", (1.0, 1.2, 8.0, 101.0)), ("gradient", (0.001, 0.5, 0.8, 1.0)),
              ("inclusive_boundaries", (0.01, 1.0, 100.0)))


def synthetic_classifiers() -> Dict[str, Any]:
    """The chapter's three synthetic ratio arrays, classified directly (not measurements)."""
    return {name: {"ratios": list(ratios), "classes": [classify_ratio(r).value for r in ratios]}
            for name, ratios in _SYNTHETIC}


def laptop_plan() -> Dict[str, Any]:
    """Symbolic metadata of the laptop-scale decoder: checked parameter arithmetic only."""
    c = LAPTOP_CONFIG
    return {"vocabulary_size": c.vocabulary_size, "model_width": c.model_width, "layers": c.layers,
            "heads": c.heads, "kv_heads": c.kv_heads, "feed_forward_width": c.feed_forward_width,
            "context": c.max_positions, "parameter_count": c.parameter_count,
            "factor": f"1/sqrt({c.layers})", "factor_value": DepthScalePolicy(c.layers).factor,
            "symbolic_only": True}


def demo_trace() -> Dict[str, Any]:
    """The whole demo document (format ``pydepth-ch06-demo-v1``)."""
    return {"format": DEMO_FORMAT, "seed": SEED, "tokens": list(TOKENS),
            "targets": list(TARGETS), "band": list(HEALTH_BAND),
            "worked_values": worked_values(),
            "fixtures": [fixture(*f) for f in FIXTURES],
            "synthetic_classifiers": synthetic_classifiers(),
            "laptop_plan": laptop_plan()}


def _f6(x: float) -> str:
    return f"{x:.6f}"


def demo_table(doc: Dict[str, Any]) -> str:
    """The demo document as the chapter's tables, for people (six decimals)."""
    out: List[str] = []
    w = doc["worked_values"]
    out += ["Worked values: selected output-projection vector " + str(w["vector"]), ""]
    out += format_table(("blocks", "factor", "selected coefficients", "Xavier 4x4 half-bound", "variance"),
                        [(d, _f6(w["factors"][d]), ", ".join(_f6(v) for v in w["selected"][d]),
                          f"{w['xavier_4x4'][d]['half_bound']} = {_f6(w['xavier_4x4'][d]['half_bound_value'])}",
                          f"{w['xavier_4x4'][d]['variance']} = {_f6(w['xavier_4x4'][d]['variance_value'])}")
                         for d in map(str, w["depths"])])
    out += [f"unselected query vector (all depths): {w['query_vector_unchanged']}", ""]
    band = doc["band"]
    out.append(f"Seed {doc['seed']}, tokens {doc['tokens']}, targets {doc['targets']}, "
               f"inclusive band [{band[0]}, {band[1]:g}]")
    for fx in doc["fixtures"]:
        rep = fx["initialized"]
        out += ["", fx["title"] + f" ({fx['id']}, budget profile {fx['profile']})",
                f"complete blocks {fx['layers']}, width {fx['width']}, heads {fx['heads']}, "
                f"feed-forward {fx['ff_width']}, vocabulary {fx['vocabulary']}, positions {fx['max_positions']}",
                f"stored parameters {fx['parameters']}, factor {_f6(fx['factor'])}, "
                f"transformed tensors {fx['transformed_tensors']}, mean loss {_f6(rep['loss'])} nats",
                f"A_0 {_f6(rep['input_activation_normalizer'])}, G_2L {_f6(rep['terminal_adjoint_normalizer'])}, "
                + ("all site ratios within band" if rep["within_band"] else "SOME RATIOS OUTSIDE THE BAND")]
        out += site_table(rep["sites"])
    for key, title in (("activation_ratio_max", "Maximum activation RMS / input activation RMS"),
                       ("adjoint_ratio_max", "Maximum residual-adjoint RMS / terminal residual-adjoint RMS")):
        out += ["", f"{title}; seed {doc['seed']}"]
        out += format_table(("fixture", "", "initialized", "same-base unscaled"),
                            [(fx["id"], "", _f6(fx["initialized"][key]),
                              _f6(fx["same_base_unscaled_control"][key])) for fx in doc["fixtures"]])
    out += ["", "Same-base unscaled controls"]
    out += format_table(("fixture", "", "A_0", "G_2L", "A_s/A_0 min", "A_s/A_0 max", "G_s/G_2L min",
                         "G_s/G_2L max", "band"),
                        [(fx["id"], "", _f6(c["input_activation_normalizer"]),
                          _f6(c["terminal_adjoint_normalizer"]), _f6(c["activation_ratio_min"]),
                          _f6(c["activation_ratio_max"]), _f6(c["adjoint_ratio_min"]),
                          _f6(c["adjoint_ratio_max"]), "within" if c["within_band"] else "OUTSIDE")
                         for fx in doc["fixtures"] for c in [fx["same_base_unscaled_control"]]])
    for name, arr in doc["synthetic_classifiers"].items():
        out += ["", f"Synthetic {name.replace('_', ' ')} ratios (not decoder measurements)"]
        out += format_table(("index", "", "ratio", "class"),
                            [(str(i), "", f"{r:g}", c) for i, (r, c) in enumerate(zip(arr["ratios"], arr["classes"]))])
    lp = doc["laptop_plan"]
    out += ["", "Laptop plan (symbolic only, nothing allocated or executed)",
            f"vocabulary {lp['vocabulary_size']}, width {lp['model_width']}, blocks {lp['layers']}, "
            f"heads {lp['heads']}, kv heads {lp['kv_heads']}, feed-forward {lp['feed_forward_width']}, "
            f"context {lp['context']}: {lp['parameter_count']} parameters, factor {lp['factor']}"]
    return "\n".join(out)
