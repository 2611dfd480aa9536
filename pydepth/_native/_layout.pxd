# SPDX-License-Identifier: MIT
# The configuration tuple -> pd_config conversion of _layout.pyx, for the modules that build models.
from ._cdefs cimport pd_config

cdef pd_config _config(tuple c)
