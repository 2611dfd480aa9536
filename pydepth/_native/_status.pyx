# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""The core's status codes: CoreError, the identifier table, and the check every C call's status goes through."""
from cpython.exc cimport PyErr_Occurred
from ._cdefs cimport *
from ..errors import PydepthError as _PydepthError


class CoreError(_PydepthError):
    """A status from the C core; pydepth.errors turns it into a typed exception. One that
    escapes untranslated is still a PydepthError and prints its status by name."""

    def __init__(self, code, index=0, value=0.0, block=-1, node=-1):
        super().__init__(code, index, value, block, node)
        self.code = int(code)
        self.index = int(index)
        self.value = float(value)
        self.block = int(block)
        self.node = int(node)

    def __str__(self):
        name = {c: n for n, c in STATUS_CODES.items()}.get(self.code, "unknown status")
        where = f", block {self.block}, node {self.node}" if self.block >= 0 or self.node >= 0 else ""
        return f"pydepth core refused: {name} (status {self.code}), index {self.index}, value {self.value!r}{where}"


cdef raise_status(pd_status st, pd_error *e):
    raise CoreError(<int>st, e.index, e.value, e.block, e.node)


def _status_table():
    cdef int code
    return {pd_status_name(code).decode(): code for code in range(PD_STATUS_COUNT)}


#: Status identifier ("ERR_TOKEN") -> code, from the C table in csrc/pd_error.h.
STATUS_CODES = _status_table()


cdef int _raise_pending() except -1:
    return -1  # propagates the exception the interrupt check left set (KeyboardInterrupt)


cdef int _check_status(pd_status st, pd_error *e) except -1:
    if st == PD_OK:
        return 0
    if st == PD_ERR_INTERRUPTED and PyErr_Occurred() != NULL:
        return _raise_pending()
    raise_status(st, e)
