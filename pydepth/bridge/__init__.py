# SPDX-License-Identifier: MIT
"""What the framework bridges (``pydepth.torch``, ``pydepth.jax``) share and that needs no
framework: the depth-scaling schemes and the records of scaling and auditing."""
