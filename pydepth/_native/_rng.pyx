# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""The generator (SplitMix64) and the Xavier scale the parameter draws use."""
from libc.stdint cimport uint64_t
from ._cdefs cimport *
from ._status cimport raise_status


def _u64_state(name, value):
    from .._checks import as_u64
    from ..errors import GeneratorStateError
    return as_u64(name, value, GeneratorStateError)


cdef class SplitMix64:
    """SplitMix64 generator; the seed is the raw state before the first draw."""

    def __init__(self, seed):
        self.rng.state = <uint64_t>_u64_state("seed", seed)

    @classmethod
    def from_state(cls, state):
        """A generator resuming from a recorded state."""
        return cls(state)

    @property
    def state(self):
        """The current 64-bit state as an int."""
        return int(self.rng.state)

    def next_u64(self):
        """Advance once and return the mixed 64-bit output."""
        return int(pd_rng_next_u64(&self.rng))

    def next_unit_f64(self):
        """Advance once and return (output >> 11) * 2**-53, in [0, 1)."""
        return pd_rng_next_unit_f64(&self.rng)

    def copy(self):
        """An independent generator with the same state."""
        return SplitMix64(int(self.rng.state))

    def _set_state(self, state):
        self.rng.state = <uint64_t>_u64_state("state", state)

    def __eq__(self, other):
        return isinstance(other, SplitMix64) and other.state == self.state

    def __hash__(self):
        return hash(("SplitMix64", int(self.rng.state)))

    def __repr__(self):
        return f"SplitMix64.from_state({int(self.rng.state)})"

    def __reduce__(self):
        return (SplitMix64, (int(self.rng.state),))


def xavier_scale_raw(fan_in, fan_out):
    """(fan_in, fan_out, target_variance, standard_deviation, uniform_limit) or CoreError."""
    cdef pd_xavier_scale s
    cdef pd_error e
    cdef pd_status st = pd_xavier_scale_of(fan_in, fan_out, &s, &e)
    if st != PD_OK:
        raise_status(st, &e)
    return (s.fan_in, s.fan_out, s.target_variance, s.standard_deviation, s.uniform_limit)
