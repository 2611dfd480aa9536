# SPDX-License-Identifier: MIT
"""The sections of each kind of report, built from the files of its output directory."""
from __future__ import annotations

import html
import json
import pathlib
from typing import Any, Dict, List, Sequence, cast

from .._files.reading import regular_file
from ..errors import ReportInputError
from ..health import LEGEND, verdict_line
from .inline import EXIT_HEADER, exit_rows
from .page import Section, figure_html, pre_html, table_html
from .schema import check_demo, check_observations, check_observe, check_steps
from .sources import find_demo_document, find_observe_document, read_json, read_json_lines, read_own
from ..sweep.presets import SUMMARY_FILE
from ..sweep.store import SPEC_FILE

__all__ = ["SECTIONS"]


def _num(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def _site_rows(report: Dict[str, Any]) -> List[Sequence[Any]]:
    return [(s["site"], s["label"], _num(s["activation_ratio"]), s["activation_status"],
             _num(s["adjoint_ratio"]), s["adjoint_status"]) for s in report["sites"]]


_SITE_HEADER = ("site", "label", "A_s/A_0", "activation", "G_s/G_2L", "adjoint")


def _outside(report: Dict[str, Any]) -> int:
    return sum((s["activation_status"] != "within") + (s["adjoint_status"] != "within") for s in report["sites"])


def _flat(prefix: str, value: Any) -> List[Sequence[Any]]:
    """A JSON value as (dotted key, value) rows: a configuration as a table, not a JSON dump."""
    if isinstance(value, dict):
        return [row for k, v in value.items() for row in _flat(f"{prefix}.{k}" if prefix else str(k), v)]
    return [(prefix, _num(value) if isinstance(value, (int, float)) else json.dumps(value))]


def _side_by_side(model: Dict[str, Any], control: Dict[str, Any]) -> str:
    """Model and control in one table, a row per site."""
    rows = [(a["site"], a["label"], _num(a["activation_ratio"]), _num(b["activation_ratio"]),
             _num(a["adjoint_ratio"]), _num(b["adjoint_ratio"]), f"{a['activation_status']}/{a['adjoint_status']}",
             f"{b['activation_status']}/{b['adjoint_status']}") for a, b in zip(model["sites"], control["sites"])]
    return table_html(("site", "label", "A_s/A_0 model", "A_s/A_0 control", "G_s/G_2L model",
                       "G_s/G_2L control", "model A/G", "control A/G"), rows)


def _verdict(report: Dict[str, Any], control: Any) -> Section:
    """The first section: the verdict of the model (and of its control) and the legend."""
    lines = [("model", verdict_line(report["sites"], report["band"]))]
    if control is not None:
        lines.append(("same-base unscaled control", verdict_line(control["sites"], control["band"])))
    return Section("Verdict", table_html(("run", "verdict"), lines) + f"<p>{html.escape(LEGEND)}</p>")


def observe_sections(directory: pathlib.Path) -> List[Section]:
    """An observation: the verdict, the sites (model and control side by side), the ratio figure,
    then the model and batch as a table."""
    from ..plots.health import describe_config, report_figure
    path = cast(pathlib.Path, find_observe_document(directory))  # the kind was found by it
    doc = read_json(path)
    check_observe(path, doc)
    control = (doc.get("same_base_unscaled_control") or {}).get("report")
    run = [row for k, v in doc.items() if k not in ("report", "record", "same_base_unscaled_control")
           for row in _flat(k, v)]
    title = describe_config(doc["config"]) if "config" in doc else None
    sites = (_side_by_side(doc["report"], control) if control is not None
             else table_html(_SITE_HEADER, _site_rows(doc["report"])))
    return [_verdict(doc["report"], control),
            Section("Sites", f"<p>{_outside(doc['report'])} ratios outside the band.</p>" + sites),
            Section("Figure", figure_html(report_figure(doc["report"], control=control, title=title),
                                          "Residual ratios by site; the control, if observed, is overlaid.")),
            Section("Run", table_html(("field", "value"), run))]


def demo_sections(directory: pathlib.Path) -> List[Section]:
    """The chapter's demo: each fixture's verdict beside its control's, then per fixture the
    sites side by side and the ratio figure with the control overlaid."""
    from ..plots.health import report_figure
    path = cast(pathlib.Path, find_demo_document(directory))  # the kind was found by it
    doc = read_json(path)
    check_demo(path, doc)
    band = doc["band"]
    verdicts = [(f"{fx['id']} {who}", verdict_line(fx[part]["sites"], band))
                for fx in doc["fixtures"]
                for who, part in (("initialized", "initialized"), ("control", "same_base_unscaled_control"))]
    sections = [Section("Verdict", table_html(("run", "verdict"), verdicts) + f"<p>{html.escape(LEGEND)}</p>")]
    for fx in doc["fixtures"]:
        model, control = fx["initialized"], fx["same_base_unscaled_control"]
        title = f"{fx['title']} ({fx['layers']} blocks, width {fx['width']}, factor {fx['factor']:.4g})"
        losses = (f"<p>Mean loss {_num(model['loss'])} nats initialized, {_num(control['loss'])} for the "
                  f"control; {_outside(model)} initialized and {_outside(control)} control ratios outside "
                  "the band.</p>")
        sections.append(Section(f"{fx['id']}: {fx['title']}", losses + _side_by_side(model, control) + figure_html(
            report_figure(model, control=control, title=title, band=band),
            "Residual ratios by site, the same-base unscaled control overlaid.")))
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
    loss = (f"<p>{len(steps)} steps logged; loss {_num(steps[0]['loss'])} at step {steps[0]['step']}, "
            f"{_num(steps[-1]['loss'])} at step {steps[-1]['step']} (a step counts the updates the "
            "parameters had had).</p>") if steps else "<p>No step was logged.</p>"
    last = observations[-1] if observations else None
    verdict = (Section("Verdict", table_html(("run", "verdict"), [(
        f"step {last['step']} (the last observation)", verdict_line(last["report"]["sites"], last["report"]["band"]))])
        + f"<p>{html.escape(LEGEND)}</p>") if last else Section("Verdict", "<p>No health observation was logged "
                                                                  "(train with --observe-every K).</p>"))
    return [verdict, Section("Run", table_html(("setting", "value"), _train_settings(directory))),
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
    from ..sweep.summary import band_exits, cell_steps, summary_lines, verdict
    spec, table = read_spec(directory), read_table(directory)
    steps = cell_steps(table)
    band = tuple(spec.band)
    stored = read_json(directory / SPEC_FILE)
    fields = stored.get("spec", {}) if isinstance(stored, dict) else {}
    exits = band_exits(steps, band)
    sections = [Section("Verdict", f"<p><strong>{html.escape(verdict(exits, band))}</strong></p>"
                        f"<p>{html.escape(LEGEND)}</p>"),
                Section("Summary", f"<p>{table.num_rows} stored rows, {len(steps)} cell-steps. First depth out "
                        f"of the band per width, policy and step:</p>" + table_html(EXIT_HEADER, exit_rows(exits))),
                Section("Specification", table_html(("field", "value"),
                                                    [row for k, v in sorted(fields.items()) for row in _flat(k, v)]))]
    if steps:
        sections.append(Section("Figures", _sweep_figures(directory, table, steps, band)))
    summary = directory / SUMMARY_FILE
    text = read_own(summary, "summary") if summary.is_file() else "\n".join(summary_lines(steps, band))
    sections.append(Section("Summary as printed", pre_html(text)))
    return sections


def transfer_sections(directory: pathlib.Path) -> List[Section]:
    """A depth-transfer study: the verdict, the drift per parametrization, the figure, the best
    learning rate by depth, the specification and the summary as printed."""
    from ..plots.transfer import transfer_figure
    from ..sweep.transfer import SUMMARY_FILE as TRANSFER_SUMMARY
    from ..sweep.transfer import read_transfer_spec, read_transfer_table
    from ..sweep.transfer_summary import curves, drifts, optima, summary_lines, verdict
    spec, table = read_transfer_spec(directory), read_transfer_table(directory)
    points = curves(table)
    found = optima(points)
    moved = drifts(found)
    drift_rows = [(d.parametrization, f"{d.shallowest}-{d.deepest}", f"{d.octaves:+.2f}", f"{d.spread:.2f}", d.edges)
                  for d in moved]
    best_rows = [(o.parametrization, o.depth, f"{o.lr:.3g}", f"{o.log2_lr:+.2f}", o.how, _num(o.loss),
                  _num(o.activation_ratio_max), _num(o.adjoint_ratio_max), o.stopped) for o in found]
    sections = [Section("Verdict", f"<p><strong>{html.escape(verdict(moved))}</strong></p>"),
                Section("Drift", f"<p>{table.num_rows} cells stored of {len(spec.cells())}.</p>" + table_html(
                    ("parametrization", "depths", "shallow→deep (octaves)", "spread (octaves)", "optima at edge"),
                    drift_rows))]
    if points:
        sections.append(Section("Figure", figure_html(transfer_figure(points, spec),
                                                      "Held-out loss against learning rate, one curve per depth.")))
    sections += [Section("Best learning rate by depth", table_html(
                     ("parametrization", "depth", "best lr", "log2", "found by", "loss", "max A", "max G", "stopped"),
                     best_rows)),
                 Section("Specification", table_html(("field", "value"),
                                                     [row for k, v in sorted(spec.to_dict().items())
                                                      for row in _flat(k, v)]))]
    summary = directory / TRANSFER_SUMMARY
    text = read_own(summary, "summary") if summary.is_file() else "\n".join(summary_lines(points))
    sections.append(Section("Summary as printed", pre_html(text)))
    return sections


#: kind -> the function building its sections
SECTIONS = {"observe": observe_sections, "train": train_sections, "sweep": sweep_sections,
            "depth-check": sweep_sections, "demo": demo_sections, "depth-transfer": transfer_sections}
