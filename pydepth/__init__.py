# SPDX-License-Identifier: MIT
"""pydepth: depth-aware initialization and residual health for small float64 decoders,
bit-exact to the chapter's reference core."""
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
from .health import (HEALTH_BAND, BranchHealthRow, DepthHealthReport, RatioBand, ResidualHealthRow,
                     classify_ratio, observe_residual_health)
from .model import BlockForward, DecoderModel, ForwardRecord, GraphValue, NamedParameter, is_recording, no_grad
from .threads import get_num_threads, set_num_threads
from .xavier import XavierScale, xavier_scale

__all__ = ["__version__", "SplitMix64", "Batch", "DecoderConfig", "XavierScale", "xavier_scale",
           "BlockForward", "DecoderModel", "ForwardRecord", "GraphValue", "NamedParameter",
           "is_recording", "no_grad", "get_num_threads", "set_num_threads",
           "DepthScalePolicy", "DepthInitializationBudget", "FreshDepthInitialization",
           "DepthInitializedDecoder", "DepthInitializationRecord", "Fresh", "Initialized",
           "Restored", "initialize_depth_scaled", "observe_residual_health", "classify_ratio",
           "RatioBand", "HEALTH_BAND", "DepthHealthReport", "ResidualHealthRow", "BranchHealthRow",
           "checkpoint", "optim", *_error_names]
