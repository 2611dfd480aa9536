# SPDX-License-Identifier: MIT
"""The PyTorch and Hugging Face bridge: pydepth's decoder as a torch module (the twin), depth
scaling and initialization audits for any decoder, and residual health observed with hooks.

Importing this package needs PyTorch (``pip install 'pydepth[torch]'``); without it the import
raises :class:`pydepth.TorchDependencyError`. Importing ``pydepth`` itself never imports torch.
"""
from ._deps import require_torch

require_torch()

from .architectures import ARCHITECTURES, NORM_PLACEMENTS, ArchitectureSpec, DecoderLayout, find_layout  # noqa: E402
from .audit import AuditRow, InitializationAudit, audit_initialization  # noqa: E402
from .health import observe_residual_health  # noqa: E402
from .parametrize import (BranchMultiplier, TorchParametrizationRecord, apply_parametrization,  # noqa: E402
                          parameter_groups, restore_branch_multipliers)
from .scaling import DepthScalingRecord, ScaledTensor, apply_depth_scaling  # noqa: E402
from .schemes import SCHEME_ALIASES, SCHEMES, scheme_factors  # noqa: E402
from .twin import PydepthTwin, TwinOutput, from_torch, to_torch  # noqa: E402

__all__ = ["to_torch", "from_torch", "PydepthTwin", "TwinOutput", "ARCHITECTURES", "NORM_PLACEMENTS",
           "ArchitectureSpec", "DecoderLayout", "find_layout", "SCHEMES", "SCHEME_ALIASES", "apply_depth_scaling",
           "scheme_factors", "DepthScalingRecord", "ScaledTensor", "audit_initialization",
           "InitializationAudit", "AuditRow", "observe_residual_health", "apply_parametrization",
           "parameter_groups", "restore_branch_multipliers", "BranchMultiplier", "TorchParametrizationRecord"]
