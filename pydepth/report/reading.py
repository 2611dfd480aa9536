# SPDX-License-Identifier: MIT
"""The short "how to read this" text of each kind of report (plain HTML, written here once)."""
from __future__ import annotations

__all__ = ["HOW_TO_READ"]

_SITES = ("<p>A decoder with <i>L</i> blocks has 2<i>L</i>+1 residual sites: site 0 is the embedded "
          "input, odd sites follow an attention branch and even sites a feed-forward branch. "
          "<b>A<sub>s</sub>/A<sub>0</sub></b> is the RMS of the residual stream at site <i>s</i> over its "
          "RMS at the input; <b>G<sub>s</sub>/G<sub>2L</sub></b> is the RMS of the mean loss's adjoint "
          "(its gradient with respect to the residual stream) at site <i>s</i> over that at the last "
          "site. A ratio inside the band (shaded; the chapter's band is [0.01, 100]) is healthy; a point "
          "outside it is marked.</p>")

HOW_TO_READ = {
    "observe": _SITES + "<p>One forward and backward pass of one model on one batch. With a "
               "same-base unscaled control, both are drawn: the control is the same random draw "
               "before the depth policy scaled the residual output projections by 1/&radic;L.</p>",
    "train": _SITES + "<p>The loss is the mean next-byte cross entropy in nats before each update. "
             "Residual health was observed every few steps (and at the end) on the step's batch; "
             "each line is one site, from the input (dark) to the output (light).</p>",
    "sweep": _SITES + "<p>One cell per depth, width, seed and policy; each is observed at the listed "
             "optimizer steps on a fixed batch. The depth-check figure shows, per depth, the largest "
             "ratio over all sites (median over seeds, with the range); the heat map shows every site "
             "of the deepest model.</p>",
    "demo": _SITES + "<p>The chapter's fixed example: four seeded decoders, each initialized by the "
            "depth policy (residual output projections scaled by 1/&radic;L) and observed beside its "
            "same-base unscaled control, the same random draw before scaling, on one fixed batch. The "
            "demo itself checked every stored transform bit for bit; the initialized models must lie "
            "in the band.</p>",
    "depth-check": _SITES + "<p>A depth check compares the depth policy (<i>scaled</i>) with the "
                   "same-base control (<i>unscaled</i>) over depths, widths and seeds. The summary "
                   "names, per policy, the first depth at which any seed leaves the band, and why.</p>",
    "depth-transfer": "<p>Each cell trains one decoder for the same number of AdamW updates on the same "
                      "text in the same data order, under one depth parametrization, at one base learning "
                      "rate, and measures the mean loss on a fixed held-out batch. Each panel is one "
                      "parametrization: the held-out loss against the learning rate, one curve per depth "
                      "(dotted: the depth's optimum, refined by a parabola in log<sub>2</sub> of the rate). "
                      "If a parametrization transfers, the curves' minima line up; the drift is how far the "
                      "optimum moves, in octaves (factors of two), from the shallowest to the deepest depth. "
                      "Beside each panel: the largest residual ratios A<sub>s</sub>/A<sub>0</sub> and "
                      "G<sub>s</sub>/G<sub>2L</sub> over the sites at each depth's best rate, after training, "
                      "with the health band shaded.</p>",
}
