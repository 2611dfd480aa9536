# SPDX-License-Identifier: MIT
"""Applications of the chapter: the demo's worked values, the laptop plan, the reference-trace
export and the bit-for-bit verification of the shipped fixtures."""
