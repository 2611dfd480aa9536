# SPDX-License-Identifier: MIT
"""``pydepth audit`` and ``pydepth observe`` on pydepth configs, Hugging Face config files and
local Hugging Face model directories (nothing is downloaded)."""
import json
import os

import pytest
import torch

from pydepth.cli import main
from conftest import need_extra

os.environ.setdefault("HF_HUB_OFFLINE", "1")

LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 32, "intermediate_size": 48,
         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 64, "max_position_embeddings": 32}
PYDEPTH = {"vocabulary_size": 64, "model_width": 16, "heads": 2, "feed_forward_width": 24, "layers": 3,
           "max_positions": 16}


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_audit_of_a_pydepth_config_is_clean_and_strict_flags_the_unscaled_model(tmp_path, capsys):
    cfg = write(tmp_path, "pd.json", PYDEPTH)
    code, out, _ = run(capsys, "audit", cfg)
    assert code == 0 and "all matrices as the scheme predicts" in out
    code, out, _ = run(capsys, "audit", cfg, "--unscaled", "--strict")
    assert code == 1 and "FINDINGS: 6 unscaled" in out


def test_audit_of_a_hf_config_reports_rows_as_json(tmp_path, capsys):
    code, out, _ = run(capsys, "audit", write(tmp_path, "config.json", LLAMA), "--format", "json", "--seed", "3")
    doc = json.loads(out)
    rows = {r["name"]: r for r in doc["audit"]["rows"]}
    assert code == 0 and doc["audit"]["architecture"] == "hf-llama"
    assert rows["model.layers.1.mlp.down_proj.weight"]["verdict"] == "unscaled"
    assert rows["model.layers.1.mlp.up_proj.weight"]["verdict"] == "ok"


def test_audit_reads_the_weights_of_a_local_checkpoint(tmp_path, capsys, torch_models):
    model = torch_models.hf("gpt2", 2).float()
    with torch.no_grad():  # a checkpoint whose c_proj scaling was skipped
        for block in model.transformer.h:
            block.attn.c_proj.weight.normal_(0.0, 0.02)
    model.save_pretrained(tmp_path / "ckpt")
    code, out, _ = run(capsys, "audit", str(tmp_path / "ckpt"), "--scheme", "1/sqrt(2L)", "--strict")
    assert code == 1
    assert "checkpoint" in out
    lines = [ln for ln in out.splitlines() if ".attn.c_proj.weight" in ln]
    assert len(lines) == 2 and all(ln.endswith("unscaled") for ln in lines)
    assert all(ln.endswith("ok") for ln in out.splitlines() if ".mlp.c_proj.weight" in ln)


def test_observe_accepts_a_hf_config_and_a_model_directory(tmp_path, capsys):
    cfg = write(tmp_path, "llama.json", LLAMA)
    code, out, _ = run(capsys, "observe", "--config", cfg, "--seed", "1", "--tokens", "1,2,3,4,5,6,7,8",
                       "--batch-rows", "2", "--valid", "1,1,1,1,1,1,0,0", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and len(doc["report"]["sites"]) == 5 and doc["token_shape"] == [2, 4]
    assert doc["report"]["valid_positions"] == 3 + 1
    directory = tmp_path / "llama"
    directory.mkdir()
    write(directory, "config.json", LLAMA)
    code, out, _ = run(capsys, "observe", "--config", str(directory), "--seed", "1", "--tokens", "1,2,3,4,5,6,7,8",
                       "--batch-rows", "2", "--valid", "1,1,1,1,1,1,0,0", "--format", "table")
    assert code == 0 and "block.1.after_feed_forward" in out


def test_observe_of_a_pydepth_config_needs_two_tokens_per_row_without_targets(tmp_path, capsys):
    code, _, err = run(capsys, "observe", "--config", write(tmp_path, "pd.json", PYDEPTH), "--seed", "1",
                       "--tokens", "1,2", "--batch-rows", "2")
    assert code == 1 and "without --targets each row needs at least 2 tokens" in err


@pytest.mark.parametrize("doc,match", [({"model_type": "no-such-model"}, "no-such-model"), ("[1, 2]", "JSON object")])
def test_bad_model_sources_are_refused_with_a_message(doc, match, tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    code, _, err = run(capsys, "audit", str(path))
    assert code == 1 and match in err
    code, _, err = run(capsys, "audit", str(tmp_path / "missing.json"))
    assert code == 1 and "no such file" in err


def test_observe_of_a_saved_model_needs_no_seed_and_a_config_without_weights_uses_the_default_seed(tmp_path, capsys):
    need_extra("hf")
    import transformers
    config = transformers.LlamaConfig(**{k: v for k, v in LLAMA.items() if k != "model_type"})
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "saved")
    code, out, err = run(capsys, "observe", "--config", str(tmp_path / "saved"), "--tokens", "1,2,3,4")
    assert code == 0 and "block.1.after_feed_forward" in out, err
    config = write(tmp_path, "llama.json", LLAMA)
    code, default, err = run(capsys, "observe", "--config", config, "--tokens", "1,2,3,4")
    assert code == 0, err
    code, chapter, err = run(capsys, "observe", "--config", config, "--tokens", "1,2,3,4", "--seed", "4701")
    assert code == 0 and default == chapter, err
