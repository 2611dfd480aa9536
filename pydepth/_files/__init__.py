# SPDX-License-Identifier: MIT
"""Files on disk as hostile input and durable output: the safetensors container of a checkpoint
(``container``) and atomic replacement of a file (``atomic``)."""
