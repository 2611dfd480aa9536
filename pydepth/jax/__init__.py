# SPDX-License-Identifier: MIT
"""The JAX bridge: residual health and depth scaling for Flax Linen, Flax NNX and Equinox
decoders, unrolled or scanned, and plain functions over a params pytree, reported with pydepth's own report types.

Importing this package needs JAX (``pip install 'pydepth[jax]'``: jax, flax, equinox); without
it the import raises :class:`pydepth.JaxDependencyError`. Importing ``pydepth`` itself never
imports JAX.
"""
from ._deps import require_jax

require_jax()

from ..bridge.schemes import SCHEMES, DepthScalingRecord, InitializationAudit, scheme_factors  # noqa: E402
from .audit import audit_initialization, identify_scheme  # noqa: E402
from .monitor import JaxHealthMonitor  # noqa: E402
from .plain import PlainParams, attention_output, residual_block  # noqa: E402
from .health import SiteTape, observe_residual_health, residual_sums, residual_tape  # noqa: E402
from .scaling import apply_depth_scaling, scaling_count  # noqa: E402
from .sites import ResidualSites, report_from_sums  # noqa: E402

__all__ = ["ResidualSites", "observe_residual_health", "residual_sums", "residual_tape", "SiteTape",
           "report_from_sums", "SCHEMES", "scheme_factors", "apply_depth_scaling", "scaling_count",
           "DepthScalingRecord", "audit_initialization", "identify_scheme", "InitializationAudit",
           "JaxHealthMonitor", "PlainParams", "residual_block", "attention_output"]
