# SPDX-License-Identifier: MIT
# The generator type of _rng.pyx, for the skin modules that draw with it (_graph.pyx).
from ._cdefs cimport pd_rng


cdef class SplitMix64:
    cdef pd_rng rng
