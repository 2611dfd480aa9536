# SPDX-License-Identifier: MIT
"""The package version, one owner: checkpoints, sweep stores and the CLI read it here."""
#: This release of pydepth (PEP 440).
__version__ = "0.1.0"
