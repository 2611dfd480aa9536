"""pydepth: depth-aware initialization and residual health for small float64 decoders,
bit-exact to the chapter's reference core."""
try:
    from ._core import SplitMix64
except ModuleNotFoundError as _err:  # an unbuilt checkout shadows the installed package
    if _err.name != f"{__name__}._core":
        raise
    from ._unbuilt import unbuilt_core
    unbuilt_core(__file__)
from .batch import Batch
from .config import DecoderConfig
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _error_names
from .init import XavierScale, xavier_scale
from .model import (BlockForward, DecoderModel, ForwardRecord, GraphValue, NamedParameter,
                    is_recording, no_grad)
from .threads import get_num_threads, set_num_threads

__version__ = "0.1.0"

__all__ = ["SplitMix64", "Batch", "DecoderConfig", "XavierScale", "xavier_scale",
           "BlockForward", "DecoderModel", "ForwardRecord", "GraphValue", "NamedParameter",
           "is_recording", "no_grad", "get_num_threads", "set_num_threads", *_error_names]

from .depth_init import (DepthInitializationBudget, DepthInitializationRecord,  # noqa: E402
                         DepthInitializedDecoder, DepthScalePolicy, Fresh,
                         FreshDepthInitialization, Initialized, Restored, initialize_depth_scaled)
from .health import (HEALTH_BAND, BranchHealthRow, DepthHealthReport,  # noqa: E402
                     RatioBand, ResidualHealthRow, classify_ratio, observe_residual_health)

__all__ += ["DepthScalePolicy", "DepthInitializationBudget", "FreshDepthInitialization",
            "DepthInitializedDecoder", "DepthInitializationRecord", "Fresh", "Initialized",
            "Restored", "initialize_depth_scaled", "observe_residual_health", "classify_ratio",
            "RatioBand", "HEALTH_BAND", "DepthHealthReport", "ResidualHealthRow", "BranchHealthRow"]

from . import checkpoint, optim  # noqa: E402,F401
