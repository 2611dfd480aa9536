# SPDX-License-Identifier: MIT
"""The package version, one owner: checkpoints, sweep stores and the CLI read it here."""
__version__ = "0.1.0"
