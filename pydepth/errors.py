# SPDX-License-Identifier: MIT
"""The exception hierarchy of pydepth; every error names the offending value."""
from __future__ import annotations


class PydepthError(Exception):
    """Base class of every pydepth error."""


class ArgumentTypeError(PydepthError, TypeError):
    """An argument has the wrong type; the message names the argument and what it got."""


class UnknownNameError(PydepthError, KeyError):
    """No parameter or recorded value has this name."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class GeneratorStateError(PydepthError, ValueError):
    """A SplitMix64 seed or state is not an integer in [0, 2**64)."""


class ThreadCountError(PydepthError, ValueError):
    """A kernel thread count is not an integer in [1, 1024]."""


class ConfigError(PydepthError, ValueError):
    """An invalid decoder configuration."""


class ParameterNameError(PydepthError, ValueError):
    """A parameter name breaks the naming rule, or is duplicated."""


class ParameterLayoutError(PydepthError, ValueError):
    """Parameters do not match the decoder layout (count, names, order, shapes, finiteness)."""


class TokenError(PydepthError, ValueError):
    """Token ids, targets, batch shape or segment layout are invalid."""


class InitializationError(PydepthError, ValueError):
    """Xavier initialization cannot be computed or allocated for these fans."""


class AllocationError(InitializationError, MemoryError):
    """Memory for parameters or graph values could not be allocated."""


class DepthScaleError(PydepthError, ValueError):
    """A depth-scale policy cannot be built."""


class ZeroDepthError(DepthScaleError):
    """The depth policy needs at least one complete block."""


class InvalidFactorError(DepthScaleError):
    """The computed depth factor is not positive and finite."""


class DepthInitError(PydepthError):
    """Depth-scaled initialization refused."""


class BudgetExceededError(DepthInitError, ValueError):
    """The configuration exceeds the caller's parameter or position budget."""


class InvalidBudgetError(DepthInitError, ValueError):
    """A depth-initialization budget bound is not a non-negative integer below 2**64."""


class ModifiedFreshParameterError(DepthInitError):
    """A fresh base parameter was updated or has a non-zero gradient before completion."""


class AlreadyCompletedError(DepthInitError):
    """This fresh preparation has already been completed."""


class NotFreshError(DepthInitError, ValueError):
    """Only a Fresh source may be initialized."""


class RecordFormatError(DepthInitError, ValueError):
    """A construction record field is malformed (missing, mistyped, out of range)."""


class RecordMismatchError(DepthInitError, ValueError):
    """A construction record does not match the supplied parameters."""


class AutodiffError(PydepthError):
    """The reverse pass cannot run."""


class ForeignRecordError(AutodiffError, ValueError):
    """A forward record was produced by another model."""


class StaleOperandError(AutodiffError):
    """A parameter changed after the graph was recorded."""


class NonFiniteError(AutodiffError, FloatingPointError):
    """A NaN or infinity arose in the forward or reverse pass."""


class GraphReleasedError(AutodiffError):
    """The graph was released and cannot be used again."""


class ValueNotKeptError(AutodiffError, LookupError):
    """A named value was read from a forward record that did not keep it (record=False, or
    keep='training')."""


class DepthHealthError(PydepthError):
    """Residual health cannot be observed."""


class InvalidNormalizerError(DepthHealthError):
    """A ratio normalizer is zero, negative or not finite."""


class MissingAdjointError(DepthHealthError):
    """A residual site has no completed adjoint in the loss graph."""


class InvalidGeometryError(DepthHealthError, ValueError):
    """Shapes of sites, adjoints or the validity mask disagree."""


class ModelForwardMismatchError(DepthHealthError, ValueError):
    """The forward record was not produced by this model."""


class EmptyValidityError(DepthHealthError, ValueError):
    """The validity mask selects no position."""


class NonFiniteValueError(DepthHealthError, ValueError):
    """A valid value, or a ratio to classify, is not finite."""


class InvalidBandError(DepthHealthError, ValueError):
    """A health band is not a pair ``(low, high)`` of finite numbers with ``0 <= low <= high``."""


class ReferenceDataError(PydepthError, ValueError):
    """A reference trace file is unreadable or not in the pydepth-reference-trace-v1 format."""


class TorchBridgeError(PydepthError):
    """The PyTorch / Hugging Face bridge (``pydepth.torch``) refused a module or an input."""


class TorchDependencyError(TorchBridgeError, ImportError):
    """torch (extra ``pydepth[torch]``) or transformers (extra ``pydepth[hf]``) is missing."""


class ArchitectureError(TorchBridgeError, ValueError):
    """A module's structure is not a recognized decoder and no name patterns were given."""


class ScalingSchemeError(TorchBridgeError, ValueError):
    """A depth-scaling scheme is unknown or gave a factor that is not positive and finite."""


class AlreadyScaledError(TorchBridgeError):
    """Depth scaling was already applied to this module (pass ``force=True`` to repeat it)."""


class UnsupportedModuleError(TorchBridgeError, TypeError):
    """The module cannot be observed as given (compiled, wrong output, missing loss)."""


class JaxBridgeError(PydepthError):
    """The JAX bridge (``pydepth.jax``: Flax Linen, Flax NNX, Equinox) refused a model or an input."""


class JaxDependencyError(JaxBridgeError, ImportError):
    """jax, flax or equinox (extra ``pydepth[jax]``) is missing."""


class SiteSpecError(JaxBridgeError, ValueError):
    """A residual-site description does not match the model (no such blocks, no attention
    submodule, a layer axis the leaves do not have, a site seen twice or never)."""


class JaxScalingSchemeError(JaxBridgeError, ScalingSchemeError):
    """JAX depth scaling or its audit refused a scheme, a pattern or a depth (also a
    :class:`ScalingSchemeError`, as the torch bridge's)."""


class JaxMonitorSettingError(JaxBridgeError, ValueError):
    """A JAX health monitor setting is out of range (``every`` not a positive integer)."""


class JaxNamedArrayError(JaxBridgeError, TypeError):
    """A model holds haliax ``NamedArray`` parameters (Levanter), which the JAX bridge does not read."""


class JaxAlreadyScaledError(JaxBridgeError, AlreadyScaledError):
    """A JAX model carries the mark of an earlier depth scaling (pass ``force=True`` to repeat it)."""


class SinkDependencyError(PydepthError, ImportError):
    """A metrics sink's logger (wandb, mlflow, tensorboard) is not installed."""


class LogSpecError(PydepthError, ValueError):
    """A ``pydepth train --log`` spec names no known logger, lacks its place, or names a place that cannot be one."""


class LogTargetError(PydepthError, RuntimeError):
    """A ``pydepth train --log`` logger could not be opened (its package's own error, named with the spec)."""


class OptimizerError(PydepthError):
    """An optimizer cannot be built, step or load its state."""


class InvalidHyperparameterError(OptimizerError, ValueError):
    """A learning rate, beta, eps, momentum, weight decay or schedule value is outside its domain."""


class NonFiniteUpdateError(OptimizerError, FloatingPointError):
    """An update would produce a NaN or infinity; no parameter or slot was changed."""


class OptimizerStateError(OptimizerError, ValueError):
    """An optimizer state dict does not match the optimizer's kind, parameters or slot shapes."""

class StateDictError(ParameterLayoutError):
    """A model state dict has missing, unexpected, wrongly shaped or non-finite entries."""


class CheckpointError(PydepthError):
    """A checkpoint cannot be written or read; nothing was loaded."""


class CheckpointFormatError(CheckpointError, ValueError):
    """Not a complete pydepth safetensors checkpoint: truncated, bad header length, non-JSON or
    wrong metadata, a tensor missing or of the wrong dtype or shape."""


class CheckpointMismatchError(CheckpointError, ValueError):
    """The checkpoint's parts disagree: tensors and config, optimizer state and parameters,
    construction record and model."""


class CheckpointFileError(CheckpointError, OSError):
    """The checkpoint path cannot be read or written as a regular file: empty, a directory, a
    FIFO or device, missing, or the write failed (disk full, read-only); the old file is kept."""


class CheckpointVersionError(CheckpointError):
    """The checkpoint was written under a newer checkpoint format or numerics contract."""


class ElementaryInputError(PydepthError, TypeError, ValueError):
    """An input to pydepth.elementary is not a real number array exactly representable in float64,
    or the arguments' shapes do not broadcast."""


class MonitorSettingError(TorchBridgeError, ValueError):
    """A training-health monitor setting is out of range (``every``, ``batch``) or a due
    observation has no batch to observe."""


class ReportInputError(PydepthError, ValueError):
    """``pydepth report`` was given a directory it cannot read: missing, not pydepth output, or
    holding a file that is not what its name says."""


class ParametrizationError(PydepthError, ValueError):
    """A depth parametrization name, parameter group or block index is not in the table of
    ``pydepth.parametrizations``, or a branch multiplier is not positive and finite; the message
    names the bad value and what is allowed."""


__all__ = [name for name in dir() if name.endswith("Error")]


class InputFileError(PydepthError, OSError):
    """A file pydepth reads is not a regular file (a FIFO, device, socket or directory), is
    larger than the cap of its kind, or cannot be decoded; the message names the file."""


class RunDirectoryError(PydepthError, OSError):
    """A run directory or sweep store cannot be used: another live run holds its lock, it
    holds another run (and neither resume nor overwrite was asked), or a file in it cannot be
    written; the message names the directory or file."""


class OutputFileError(PydepthError, OSError):
    """A result file cannot be written (disk full, read-only, a directory in its place); the
    previous file, if any, is unchanged. The message names the file."""
