# SPDX-License-Identifier: MIT
"""Refusals that say what was found and what to do: unknown structures name the ArchitectureSpec
fields, transformers' class lists never reach the user, inference mode, in-place compilation and
tuple outputs get messages of their own."""
import json

import pytest

torch = pytest.importorskip("torch", reason="the torch bridge needs the 'torch' extra")

from pydepth import ArchitectureError, UnsupportedModuleError  # noqa: E402
from pydepth.cli import main  # noqa: E402
from pydepth.torch import find_layout, observe_residual_health  # noqa: E402


def test_an_unknown_structure_says_what_was_found_why_and_which_fields_to_fill(torch_models):
    pytest.importorskip("transformers", reason="needs the 'hf' extra")
    import transformers
    model = transformers.OPTForCausalLM(transformers.OPTConfig(  # post-LN: a norm of each sum, no residual stream
        num_hidden_layers=2, hidden_size=32, ffn_dim=64, num_attention_heads=4, vocab_size=50, word_embed_proj_dim=32,
        do_layer_norm_before=False))
    with pytest.raises(ArchitectureError) as info:
        find_layout(model)
    message = str(info.value)
    assert "model.decoder" in message and "ArchitectureSpec(" in message and "norm_placement" in message
    assert len(message) < 1500
    assert "post-LN" in message.splitlines()[0] and len(message.splitlines()[0]) < 300


@pytest.mark.parametrize("doc,match", [
    ({"model_type": "t5", "num_layers": 2, "d_model": 32, "vocab_size": 64}, "has no causal language model"),
    ({"model_type": "lama", "num_hidden_layers": 2}, "does not know model_type 'lama' \\(did you mean 'llama'"),
])
def test_configs_transformers_cannot_run_as_causal_lms_get_one_line(doc, match, tmp_path, capsys):
    pytest.importorskip("transformers", reason="needs the 'hf' extra")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    assert main(["audit", str(path)]) != 0
    err = capsys.readouterr().err
    assert pytest.importorskip("re").search(match, err), err
    assert len(err) < 400 and "Config, " not in err


def test_inference_mode_is_refused_with_what_to_do(torch_models):
    model = torch_models.hf("llama", 1)
    with torch.inference_mode(), pytest.raises(UnsupportedModuleError, match="outside the inference_mode"):
        observe_residual_health(model, torch.tensor([[1, 2, 3]]))
    observe_residual_health(model, torch.tensor([[1, 2, 3]]))  # and works outside it


def test_a_module_compiled_in_place_is_named_and_not_sent_to_orig_mod(torch_models):
    model = torch_models.hf("llama", 1)
    model.compile()
    with pytest.raises(UnsupportedModuleError, match="compiled in place") as info:
        observe_residual_health(model, torch.tensor([[1, 2, 3]]))
    assert "_orig_mod" not in str(info.value)


def test_loss_logits_tuples_are_read_and_ambiguous_tuples_refused(torch_models):
    class LossFirst(torch_models.NanoGPT):
        def forward(self, idx, targets=None):
            logits, loss = super().forward(idx, targets)
            return loss, logits

    class TwoScalars(torch_models.NanoGPT):
        def forward(self, idx, targets=None):
            logits, loss = super().forward(idx, targets)
            return loss, loss * 2, logits

    ids = torch.tensor([[1, 2, 3, 4]])
    torch.manual_seed(0)
    a = observe_residual_health(LossFirst(2).double(), ids, ids)
    torch.manual_seed(0)
    b = observe_residual_health(torch_models.NanoGPT(2).double(), ids, ids)
    assert a == b
    with pytest.raises(UnsupportedModuleError, match="positions \\[0, 1\\]"):
        observe_residual_health(TwoScalars(2).double(), ids, ids)
