# SPDX-License-Identifier: MIT
"""Named depth parametrizations (docs/depth-parametrizations.md): the table of record
(:mod:`.table`) and a native model with its AdamW built from a name (:mod:`.build`)."""

from .build import ParametrizationRecord, Parametrized, build_parametrized, initialize_parametrized, optimizer_factors
from .table import (
    DEFAULT_PARAMETRIZATION,
    GROUPS,
    PARAMETRIZATIONS,
    DepthParametrization,
    get_parametrization,
    parameter_group,
)

__all__ = [
    "GROUPS",
    "DEFAULT_PARAMETRIZATION",
    "DepthParametrization",
    "PARAMETRIZATIONS",
    "get_parametrization",
    "parameter_group",
    "ParametrizationRecord",
    "Parametrized",
    "build_parametrized",
    "initialize_parametrized",
    "optimizer_factors",
]
