# SPDX-License-Identifier: MIT
"""Observe a small decoder with its same-base control, then turn the output directory into one
self-contained HTML page (needs the 'plot' extra). Usage: python examples/share_report.py [DIR]"""
import json
import pathlib
import sys
import tempfile

from pydepth.cli import main
from pydepth.report import write_report

out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(tempfile.mkdtemp())
config = {"vocabulary_size": 266, "model_width": 16, "heads": 2, "feed_forward_width": 20, "layers": 4,
          "max_positions": 16}
(out / "config.json").parent.mkdir(parents=True, exist_ok=True)
(out / "config.json").write_text(json.dumps(config))
code = main(["observe", "--config", str(out / "config.json"), "--seed", "7", "--tokens", "0,99,100,101,102,103",
             "--targets", "99,100,101,102,103,1", "--control", "--format", "json",
             "--output", str(out / "observe" / "observe.json")])
if code != 0:
    sys.exit(code)
doc = json.loads((out / "observe" / "observe.json").read_text())
control = doc["same_base_unscaled_control"]["report"]
for name, report in (("depth-scaled", doc["report"]), ("unscaled control", control)):
    sites = report["sites"]
    print(f"{name:>16}: max A_s/A_0 {max(s['activation_ratio'] for s in sites):.3f}, "
          f"max G_s/G_2L {max(s['adjoint_ratio'] for s in sites):.3f}")
page = write_report(out / "observe")
print(f"open {page} in a browser: figures, site tables, versions and this machine's verify status")
