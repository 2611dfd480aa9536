# SPDX-License-Identifier: MIT
"""Residual health watched while training: two copies of a 16-block Hugging Face Llama built from a
config (nothing is downloaded), one with this project's depth scaling, trained side by side with
AdamW on the shipped corpus (byte-level, examples/data/corpus.txt); a HealthMonitor observes each
every 5 steps on a held batch and writes JSON lines (and TensorBoard event files when tensorboard
is installed). It ends by saying, from the numbers, which run is in the band and what differs.

    python examples/train_with_health_monitor.py [--updates 20] [--every 5] [--layers 16] [--out runs]
"""
import argparse
import os
import pathlib

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers

import pydepth
import pydepth.torch as pt
from pydepth.torch.callbacks import HealthMonitor, JsonLinesSink, TensorBoardSink
from pydepth.training.step import byte_documents, draw_batch

CORPUS = pathlib.Path(__file__).resolve().parent / "data" / "corpus.txt"
ROWS, TOKENS = 8, 32


def llama(scaled, layers):
    """The same random byte-level Llama, with or without 1/sqrt(L) on its residual output projections."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=layers, hidden_size=32, intermediate_size=64, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=256, max_position_embeddings=64))
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


def batch(documents, rng, rows):
    """``rows`` rows of TOKENS bytes cut from the corpus's paragraphs (as `pydepth train` draws them)."""
    return torch.from_numpy(draw_batch(documents, rng, rows, TOKENS).tokens.copy())


def _compare(last, ratio, what):
    """Which run's largest ``ratio`` is higher, by what factor, and its headroom to the band's edge."""
    top = {name: getattr(r, ratio)[1] for name, r in last.items()}
    high, low = sorted(top, key=top.get, reverse=True)
    edge = last[high].band[1]
    return (f"largest {what}: {high} {top[high]:.3g}, {top[high] / top[low]:.2g}x {low}'s {top[low]:.3g} "
            f"({edge / top[high]:.2g}x below the band's upper edge {edge:g}, against {edge / top[low]:.2g}x)")


def conclusion(last, losses):
    """What the last observation of each run says, in words, from its numbers."""
    lines = []
    for name, report in last.items():
        where = "inside" if report.within_band else "OUTSIDE"
        lines.append(f"{name}: {where} the band [{report.band[0]:g}, {report.band[1]:g}] at the end, "
                     f"last loss {losses[name]:.3f} nats")
    lines.append(_compare(last, "activation_ratio_range", "A_s/A_0 (how much the residual stream's RMS "
                          "grew over its input's)"))
    lines.append(_compare(last, "adjoint_ratio_range", "G_s/G_2L (how much the loss's gradient at a site "
                          "exceeds that at the output)"))
    inside = [name for name, r in last.items() if r.within_band]
    if len(inside) == 1:
        lines.append(f"only {inside[0]} stays in the band")
    else:
        lines.append("both runs stay in the band here: at this depth and length they differ in how far each "
                     "is from its edge, not in a failure" if inside else "neither run stays in the band")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--updates", dest="steps", type=int, default=20)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--layers", type=int, default=16, help="blocks of both models (default 16)")
    ap.add_argument("--out", default="runs", help="directory for the JSON lines and event files")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)  # matrices this small run fastest on one thread
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    documents = byte_documents(CORPUS.read_bytes())
    held = {"input_ids": batch(documents, pydepth.SplitMix64(1), 2)}
    runs = {}
    for name, scaled in (("default-init", False), ("depth-scaled", True)):
        model = llama(scaled, args.layers)
        found, writer = sinks(out, name)
        runs[name] = (model, torch.optim.AdamW(model.parameters(), lr=3e-3),
                      HealthMonitor(model, every=args.every, batch=held, sinks=found), writer)
    data = pydepth.SplitMix64(2)
    losses = {}
    print(f"{args.layers}-block byte-level Llama on {CORPUS.name}, {ROWS}x{TOKENS} bytes per step")
    print(f"{'step':>5} {'run':>13} {'loss':>7} {'act max':>8} {'adj max':>8} {'out of band':>11}")
    for _ in range(args.steps):
        ids = batch(documents, data, ROWS)
        for name, (model, opt, monitor, _) in runs.items():
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses[name] = loss.item()
            m = monitor.step()
            if m is not None:
                print(f"{monitor.last_step:>5} {name:>13} {loss.item():7.4f} {m['residual/activation_ratio_max']:8.3f} "
                      f"{m['residual/adjoint_ratio_max']:8.3f} {int(m['residual/out_of_band']):>11}")
    last = {}
    for name, (model, _, monitor, writer) in runs.items():
        last[name] = monitor.last_report or pt.observe_residual_health(model, **held)
        monitor.close()
        if writer is not None:
            writer.close()
    print("\n".join(conclusion(last, losses)))
    print(f"wrote {out / 'default-init.jsonl'} and {out / 'depth-scaled.jsonl'}"
          + (" and TensorBoard event files" if writer is not None else ""))


if __name__ == "__main__":
    main()
