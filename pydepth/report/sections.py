# SPDX-License-Identifier: MIT
"""The sections of each kind of report, built from the files of its output directory."""
from __future__ import annotations

import json
import pathlib
from typing import Any, Dict, List, Sequence, cast

from .._files.reading import regular_file
from ..errors import ReportInputError
from .page import Section, figure_html, pre_html, table_html
from .schema import check_observations, check_observe, check_steps
from .sources import find_observe_document, read_json, read_json_lines, read_own

__all__ = ["SECTIONS"]


def _num(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def _site_rows(report: Dict[str, Any]) -> List[Sequence[Any]]:
    return [(s["site"], s["label"], _num(s["activation_ratio"]), s["activation_status"],
             _num(s["adjoint_ratio"]), s["adjoint_status"]) for s in report["sites"]]


_SITE_HEADER = ("site", "label", "A_s/A_0", "activation", "G_s/G_2L", "adjoint")


def _outside(report: Dict[str, Any]) -> int:
    return sum((s["activation_status"] != "within") + (s["adjoint_status"] != "within") for s in report["sites"])


def observe_sections(directory: pathlib.Path) -> List[Section]:
    """An observation: the model and batch, the ratio figure (with its control), the site table."""
    from ..plots.health import describe_config, report_figure
    path = cast(pathlib.Path, find_observe_document(directory))  # the kind was found by it
    doc = read_json(path)
    check_observe(path, doc)
    control = (doc.get("same_base_unscaled_control") or {}).get("report")
    run = [(k, json.dumps(v)) for k, v in doc.items() if k not in ("report", "record", "same_base_unscaled_control")]
    title = describe_config(doc["config"]) if "config" in doc else None
    sections = [Section("Run", table_html(("field", "value"), run)),
                Section("Figure", figure_html(report_figure(doc["report"], control=control, title=title),
                                              "Residual ratios by site; the control, if observed, is overlaid."))]
    sections.append(Section("Sites", f"<p>{_outside(doc['report'])} ratios outside the band.</p>"
                            + table_html(_SITE_HEADER, _site_rows(doc["report"]))))
    if control is not None:
        sections.append(Section("Sites of the same-base unscaled control",
                                table_html(_SITE_HEADER, _site_rows(control))))
    return sections


def _train_settings(directory: pathlib.Path) -> List[Sequence[Any]]:
    from ..checkpoint import load
    checkpoints = sorted(directory.glob("step-*.safetensors"))
    if not checkpoints:
        return [("checkpoint", "none in the directory")]
    regular_file(checkpoints[-1], "checkpoint", ReportInputError, inside=directory)
    ck = load(checkpoints[-1])
    rows: List[Sequence[Any]] = [("latest checkpoint", checkpoints[-1].name)]
    rows += [(f"config.{k}", _num(v)) for k, v in ck.config.to_dict().items()]
    extra = ck.extra.get("train", {}) if isinstance(ck.extra, dict) else {}
    rows += [(k, _num(v)) for k, v in sorted(extra.items())] if isinstance(extra, dict) else []
    return rows


def train_sections(directory: pathlib.Path) -> List[Section]:
    """A training run: its settings, the loss and health figure, the observations."""
    from ..plots.train import training_figure
    steps = read_json_lines(directory / "train.jsonl")
    check_steps(directory / "train.jsonl", steps)
    health = directory / "health.jsonl"
    observations = read_json_lines(health) if health.is_file() else []
    check_observations(health, observations)
    rows = [(o["step"], _num(o["loss"]), _num(max(s["activation_ratio"] for s in o["report"]["sites"])),
             _num(max(s["adjoint_ratio"] for s in o["report"]["sites"])), _outside(o["report"]))
            for o in observations]
    loss = (f"<p>{len(steps)} steps; loss {_num(steps[0]['loss'])} at the first, "
            f"{_num(steps[-1]['loss'])} at the last.</p>") if steps else "<p>No step was logged.</p>"
    return [Section("Run", table_html(("setting", "value"), _train_settings(directory))),
            Section("Figure", figure_html(training_figure(steps, observations),
                                          "Loss per step and each site's ratios at the observed steps.")),
            Section("Observations", loss + table_html(
                ("step", "loss", "max A_s/A_0", "max G_s/G_2L", "ratios outside the band"), rows))]


def _sweep_figures(directory: pathlib.Path, table: Any, steps: Any, band: Sequence[float]) -> str:
    from ..sweep.plots import depth_check_figure, site_heatmap_figure
    parts = []
    for width in sorted({cs.width for cs in steps}):
        parts.append(figure_html(depth_check_figure(steps, width, band),
                                 f"Largest ratio over the sites by depth, width {width}."))
        deepest = max(cs.depth for cs in steps if cs.width == width)
        parts.append(figure_html(site_heatmap_figure(table, deepest, width, band),
                                 f"Every site of the depth-{deepest} models, width {width}."))
    return "".join(parts)


def sweep_sections(directory: pathlib.Path) -> List[Section]:
    """A sweep (or depth check): its specification, figures, and where each policy leaves the band."""
    from ..sweep.store import read_spec, read_table
    from ..sweep.summary import cell_steps, summary_lines
    spec, table = read_spec(directory), read_table(directory)
    steps = cell_steps(table)
    band = tuple(spec.band)
    stored = read_json(directory / "sweep.json")
    fields = stored.get("spec", {}) if isinstance(stored, dict) else {}
    sections = [Section("Specification", table_html(("field", "value"),
                                                    [(k, json.dumps(v)) for k, v in sorted(fields.items())]))]
    if steps:
        sections.append(Section("Figures", _sweep_figures(directory, table, steps, band)))
    summary = directory / "summary.txt"
    text = read_own(summary, "summary") if summary.is_file() else "\n".join(summary_lines(steps, band))
    sections.append(Section("Summary",
                            f"<p>{table.num_rows} stored rows, {len(steps)} cell-steps.</p>" + pre_html(text)))
    return sections


#: kind -> the function building its sections
SECTIONS = {"observe": observe_sections, "train": train_sections, "sweep": sweep_sections,
            "depth-check": sweep_sections}
