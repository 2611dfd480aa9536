# SPDX-License-Identifier: MIT
"""Residual health watched while training: two copies of a Hugging Face Llama built from a config
(nothing is downloaded), one with this project's depth scaling, trained side by side with AdamW;
a HealthMonitor observes each every 5 steps on a held batch and writes JSON lines (and
TensorBoard event files when tensorboard is installed).

    python examples/train_with_health_monitor.py [--updates 20] [--every 5] [--out runs]
"""
import argparse
import os
import pathlib

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers

import pydepth.torch as pt
from pydepth.torch.callbacks import HealthMonitor, JsonLinesSink, TensorBoardSink


def llama(scaled):
    """The same random Llama, with or without 1/sqrt(L) on its residual output projections."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=6, hidden_size=32, intermediate_size=64, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=128, max_position_embeddings=64))
    if scaled:
        pt.apply_depth_scaling(model, scheme="1/sqrt(L)")
    return model


def sinks(out, name):
    """A JSON-lines file, and a TensorBoard writer when tensorboard is installed."""
    found = [JsonLinesSink(out / f"{name}.jsonl")]
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return found, None
    writer = SummaryWriter(str(out / name))
    return [*found, TensorBoardSink(writer)], writer


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--updates", dest="steps", type=int, default=20)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--out", default="runs", help="directory for the JSON lines and event files")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    held = {"input_ids": torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))}
    runs = {}
    for name, scaled in (("default-init", False), ("depth-scaled", True)):
        model = llama(scaled)
        found, writer = sinks(out, name)
        runs[name] = (model, torch.optim.AdamW(model.parameters(), lr=3e-3),
                      HealthMonitor(model, every=args.every, batch=held, sinks=found), writer)
    data = torch.Generator().manual_seed(2)
    print(f"{'step':>5} {'run':>13} {'loss':>7} {'act max':>8} {'adj max':>8} {'out of band':>11}")
    for _ in range(args.steps):
        ids = torch.randint(0, 128, (4, 16), generator=data)
        for name, (model, opt, monitor, _) in runs.items():
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            m = monitor.step()
            if m is not None:
                print(f"{monitor.last_step:>5} {name:>13} {loss.item():7.4f} {m['residual/activation_ratio_max']:8.3f} "
                      f"{m['residual/adjoint_ratio_max']:8.3f} {int(m['residual/out_of_band']):>11}")
    for _, _, monitor, writer in runs.values():
        monitor.close()
        if writer is not None:
            writer.close()
    print(f"wrote {out / 'default-init.jsonl'} and {out / 'depth-scaled.jsonl'}"
          + (" and TensorBoard event files" if writer is not None else ""))


if __name__ == "__main__":
    main()
