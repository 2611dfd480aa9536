# SPDX-License-Identifier: MIT
"""Train a tiny depth-initialized decoder on the bundled corpus with AdamW, save a checkpoint
halfway, resume from it, and check that the resumed run equals the uninterrupted one bit for bit.

    python examples/train_tiny.py                       (12 steps, checkpoint at step 6, a few seconds)
    python examples/train_tiny.py --updates 40 --checkpoint ck.safetensors

The command-line version of the same loop, with logs, plots and Ctrl-C checkpoints:
    pydepth train examples/data/corpus.txt --config examples/data/byte-8block.json --updates 300 --out runs/x
"""
import argparse
import pathlib
import sys
import tempfile

import numpy as np

import pydepth
from pydepth.training.step import byte_documents, draw_batch

parser = argparse.ArgumentParser(description="A few AdamW steps, a checkpoint, a bit-exact resume.")
parser.add_argument("--updates", dest="steps", type=int, default=12, help="optimizer updates (default 12)")
parser.add_argument("--seed", type=int, default=7, help="SplitMix64 seed of the draw and the batches (default 7)")
parser.add_argument("--checkpoint", metavar="FILE",
                    help="keep the halfway checkpoint in FILE (default: a temporary file)")
args = parser.parse_args()
if args.steps < 2:
    parser.error(f"--updates must be at least 2 (a checkpoint halfway), got {args.steps}")

corpus = pathlib.Path(__file__).resolve().parent / "data" / "corpus.txt"
documents = byte_documents(corpus.read_bytes())  # byte ids 0..255, one array per paragraph
cfg = pydepth.DecoderConfig(vocabulary_size=256, model_width=16, heads=2, feed_forward_width=32,
                            layers=4, max_positions=32)
BATCH, TOKENS, HALF = 4, 32, args.steps // 2


def start():
    """A fresh depth-initialized model, its AdamW (warmup then cosine decay) and the batch generator."""
    rng = pydepth.SplitMix64(args.seed)
    init = pydepth.FreshDepthInitialization.prepare(
        cfg, pydepth.DepthInitializationBudget.for_config(cfg), rng).complete()
    schedule = pydepth.optim.warmup_cosine(3e-3, warmup_steps=2, total_steps=args.steps, min_lr=3e-4)
    return init, pydepth.optim.AdamW(init.model.parameters, lr=schedule, weight_decay=0.01), rng


def steps(model, optimizer, rng, first, last):
    """Runs steps first..last-1; returns (step, lr, loss) rows (the loss before each update)."""
    rows = []
    for step in range(first, last):
        lr = optimizer.lr
        # zero_grad, forward, loss, backward and optimizer.step() in one call into the core
        loss = model.train_step(draw_batch(documents, rng, BATCH, TOKENS), optimizer=optimizer)
        rows.append((step, lr, loss))
    return rows


def bits(model):
    return [p.value.view(np.uint64) for p in model.parameters]


with tempfile.TemporaryDirectory() as tmp:
    path = args.checkpoint or str(pathlib.Path(tmp) / "halfway.safetensors")
    init, optimizer, rng = start()
    rows = steps(init.model, optimizer, rng, 0, HALF)
    pydepth.checkpoint.save(path, init.model, optimizer=optimizer, rng=rng, record=init.record, step=HALF)
    rows += steps(init.model, optimizer, rng, HALF, args.steps)   # the uninterrupted run goes on

    ck = pydepth.checkpoint.load(path)   # a new model, optimizer (slots, step, schedule) and generator
    resumed = steps(ck.model, ck.optimizer(), ck.rng, ck.step, args.steps)

print(f"{cfg.parameter_count:,} parameters, {cfg.layers} blocks, policy {init.record.policy_id}, "
      f"{len(documents)} paragraphs, {BATCH}x{TOKENS} bytes per step")
print(f"{'step':>4}  {'lr':>9}  {'loss (nats)':>11}  {'resumed loss':>12}")
resumed_loss = {step: loss for step, _, loss in resumed}
for step, lr, loss in rows:
    again = f"{resumed_loss[step]:>12.6f}" if step in resumed_loss else ""
    print(f"{step:>4}  {lr:>9.3g}  {loss:>11.6f}  {again}")
same_losses = np.array_equal(np.array([r[2] for r in rows[HALF:]]).view(np.uint64),
                             np.array([r[2] for r in resumed]).view(np.uint64))
same_params = all(np.array_equal(a, b) for a, b in zip(bits(init.model), bits(ck.model)))
print(f"checkpoint at step {HALF}{'' if not args.checkpoint else f' ({path})'}; resumed run equals the "
      f"uninterrupted one bit for bit: losses {same_losses}, parameters {same_params}")
sys.exit(0 if same_losses and same_params else 1)
