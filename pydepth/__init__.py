# SPDX-License-Identifier: MIT
"""pydepth: depth-aware initialization and residual health for small float64 decoders,
bit-exact to the reference core of "Initialize residual projection weights for decoder depth"
(Chapter 06 · Content revision 4).

Quick start
-----------
Install, then print every table of the chapter's demo (from a shell)::

    pip install . && pydepth demo --format table

Observe your own configuration: depth-scaled initialization, one forward pass, and the residual
health report (activation and mean-loss adjoint RMS ratios at every residual site)::

    import numpy as np
    import pydepth

    cfg = pydepth.DecoderConfig(vocabulary_size=512, model_width=64, heads=4,
                                feed_forward_width=128, layers=12, max_positions=64)
    budget = pydepth.DepthInitializationBudget.for_config(cfg)
    init = pydepth.FreshDepthInitialization.prepare(cfg, budget, pydepth.SplitMix64(0)).complete()
    tokens = np.arange(64).reshape(1, -1)
    fwd = init.model.forward(tokens)
    print(pydepth.observe_residual_health(init.model, fwd, fwd.loss((tokens + 1) % 512)).to_table())

Any PyTorch or Hugging Face decoder, in one line (``pip install '.[torch]'``)::

    import pydepth.torch as pt
    print(pt.observe_residual_health(model, input_ids).to_table())

Where to read on
----------------
The API reference lists every public name of every package and the exception tree: build it
with ``pip install '.[docs]' && mkdocs build`` from the repository root (``site/index.html``;
pages from README.md, docs/ and the package's docstrings). The README has one task per heading,
docs/numerics.md the operation order behind every bit; refusals raise subclasses of
:class:`PydepthError` (``pydepth.errors``).
"""
try:
    from ._native._rng import SplitMix64
except ModuleNotFoundError as _err:  # an unbuilt checkout shadows the installed package
    if _err.name != f"{__name__}._native._rng":  # the first compiled module imported
        raise
    from ._native._unbuilt import unbuilt_core
    unbuilt_core(__file__)

from . import checkpoint, optim
from ._version import __version__
from .batch import Batch
from .config import DecoderConfig
from .depth_init import (DepthInitializationBudget, DepthInitializationRecord, DepthInitializedDecoder,
                         DepthScalePolicy, Fresh, FreshDepthInitialization, Initialized, Restored,
                         initialize_depth_scaled)
from .errors import *  # noqa: F403
from .errors import __all__ as _error_names
from . import health as _health
from .health import (HEALTH_BAND, BranchHealthRow, DepthHealthReport, RatioBand, ResidualHealthRow,
                     classify_ratio, observe_residual_health)
from .model import BlockForward, DecoderModel, ForwardRecord, GraphValue, NamedParameter, is_recording, no_grad
from .threads import get_num_threads, set_num_threads
from .xavier import XavierScale, xavier_scale


def _health_report_html(report: DepthHealthReport) -> str:
    from .report.inline import health_report_html  # imported when a notebook first asks
    return health_report_html(report)


_health.html_renderer[0] = _health_report_html  # the composition root: health sits below the report package

__all__ = ["__version__", "SplitMix64", "Batch", "DecoderConfig", "XavierScale", "xavier_scale",
           "BlockForward", "DecoderModel", "ForwardRecord", "GraphValue", "NamedParameter",
           "is_recording", "no_grad", "get_num_threads", "set_num_threads",
           "DepthScalePolicy", "DepthInitializationBudget", "FreshDepthInitialization",
           "DepthInitializedDecoder", "DepthInitializationRecord", "Fresh", "Initialized",
           "Restored", "initialize_depth_scaled", "observe_residual_health", "classify_ratio",
           "RatioBand", "HEALTH_BAND", "DepthHealthReport", "ResidualHealthRow", "BranchHealthRow",
           "checkpoint", "optim", *_error_names]
