# SPDX-License-Identifier: MIT
"""The Cython skin over the C core (``_core``, ``_elementary``) and the helpers that translate its
status codes, node kinds and bit patterns for the Python layer."""
