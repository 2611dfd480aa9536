# SPDX-License-Identifier: MIT
# The status checks of _status.pyx every skin module raises through.
from ._cdefs cimport pd_status, pd_error

cdef raise_status(pd_status st, pd_error *e)
cdef int _check_status(pd_status st, pd_error *e) except -1
