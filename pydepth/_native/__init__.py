# SPDX-License-Identifier: MIT
"""The Cython skin over the C core, one extension per concept (``_status``, ``_layout``, ``_rng``,
``_graph``, ``_optim``, ``_step``, ``_runtime``, ``_testing``, ``_elementary``), and the helpers that translate
its status codes, node kinds and bit patterns for the Python layer."""
