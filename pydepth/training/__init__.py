"""Training a pydepth decoder: byte-level data, one optimizer step with an optional health
observation."""
from .step import BYTE_VOCABULARY, byte_documents, check_byte_config, draw_batch, observe_step, train_step

__all__ = ["BYTE_VOCABULARY", "byte_documents", "check_byte_config", "draw_batch", "observe_step", "train_step"]
