# SPDX-License-Identifier: MIT
"""Every decoder-only causal LM type of the installed transformers' auto-model mapping, built from a
tiny float64 config, is either observed and scaled — sites equal to independent hooks, the scaled
tensors multiplied by their factors and every other tensor bitwise unchanged — or refused with a
one-line reason. Types whose tiny config cannot be built offline are skipped with the reason."""
import pytest

torch = pytest.importorskip("torch", reason="the torch bridge needs the 'torch' extra")
transformers = pytest.importorskip("transformers", reason="Hugging Face models need the 'hf' extra")

from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # noqa: E402

from pydepth import ArchitectureError  # noqa: E402
from pydepth.torch import apply_depth_scaling, find_layout  # noqa: E402
from conftest import load_helper  # noqa: E402

hf_tiny = load_helper("hf_tiny.py")


@pytest.mark.parametrize("model_type", sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES))
def test_every_causal_lm_type_is_observed_and_scaled_or_refused_in_one_line(model_type):
    try:
        model = hf_tiny.tiny_model(model_type)
        ids = torch.randint(3, 50, (2, 6), generator=torch.Generator().manual_seed(1))
        model(input_ids=ids, labels=ids)
    except Exception as err:  # the tiny config itself cannot be built or run here: nothing to judge
        pytest.skip(f"{model_type}: no tiny float64 model ({type(err).__name__}: {str(err).splitlines()[0][:120]})")
    try:
        layout = find_layout(model)
    except ArchitectureError as err:
        first = str(err).splitlines()[0]
        assert len(first) < 400 and ": " in first, first
        with pytest.raises(ArchitectureError):
            apply_depth_scaling(model)
        return
    hf_tiny.assert_sites_match_independent_hooks(model, layout, ids)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    try:
        record = apply_depth_scaling(model, force=True)
    except ArchitectureError as err:  # observed, but no tensor sets a branch's scale
        assert "cannot be depth-scaled" in str(err).splitlines()[0]
        return
    scaled = {t.name: t for t in record.tensors}
    offsets = {p.name: p.offset for p in layout.projections}
    for n, p in model.named_parameters():
        t, off = scaled.get(n), offsets.get(n, 0.0)
        want = before[n] if t is None else (before[n] * t.factor if not off else (before[n] + off) * t.factor - off)
        assert torch.equal(p.detach(), want), n
