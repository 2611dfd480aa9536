# SPDX-License-Identifier: MIT
"""Run by tests/test_torch_in_step_ddp.py as ``python -P ddp_in_step_worker.py RANK DIR``, once
per rank: two gloo processes train a tiny float64 Llama under DistributedDataParallel, each on its
own micro-batch, observed in-step at step 1 with ``processes="local"`` (every rank observes its own
batch) and at step 2 with ``processes="all-reduce"``. Besides the monitors' values each rank
writes its own residual sites' sums of squares and counts, read with hooks of its own, so the test
can recompute both."""
import gc
import json
import os
import pathlib
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
import torch.distributed as dist
import transformers

from pydepth.torch.callbacks import HealthMonitor

VOCAB = 40


def model():
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=16, intermediate_size=24, num_attention_heads=2,
        num_key_value_heads=1, vocab_size=VOCAB, max_position_embeddings=32)).double().train()


def sums(tensors, valid):
    """Per tensor: (left-to-right float64 sum of squares over the valid positions, count)."""
    out = []
    for t in tensors:
        x = t.detach().to(torch.float64).numpy()[valid].reshape(-1)
        out.append((0.0 + float(np.add.accumulate(x * x)[-1]), int(x.size)))
    return out


def observed_step(ddp, layers, monitor, ids):
    """One step observed by ``monitor``; returns its report and record and this rank's own sums."""
    sites, grads = {}, {}

    def keep(site, t):
        sites[site] = t
        t.register_hook(lambda g: grads.__setitem__(site, g))

    hooks = [layers[0].register_forward_pre_hook(lambda m, a, k: keep(0, k.get("hidden_states", a[0] if a else None)),
                                                 with_kwargs=True)]
    for b, layer in enumerate(layers):
        hooks.append(layer.post_attention_layernorm.register_forward_pre_hook(lambda m, a, s=2 * b + 1: keep(s, a[0])))
        hooks.append(layer.register_forward_hook(
            lambda m, a, out, s=2 * b + 2: keep(s, out[0] if isinstance(out, tuple) else out)))
    assert monitor.begin_step()
    ddp(input_ids=ids, labels=ids).loss.backward()  # the loss gradient is 1: no unscaling
    for h in hooks:
        h.remove()
    monitor.step()
    valid = np.ones(tuple(ids.shape), dtype=bool)
    valid[:, -1] = False  # Hugging Face's shift
    order = sorted(sites)
    report = monitor.last_report
    return {"processes": monitor.last_record.processes, "valid_positions": report.valid_positions,
            "activation_rms": [r.activation_rms for r in report.sites],
            "adjoint_rms": [r.adjoint_rms for r in report.sites],
            "activation_sums": sums([sites[s] for s in order], valid),
            "adjoint_sums": sums([grads[s] for s in order], valid), "positions": int(valid.sum())}


def observe(rank, out):
    """Both observed steps on this rank; the DDP module and monitors die with this frame."""
    ddp = torch.nn.parallel.DistributedDataParallel(model())
    layers = ddp.module.model.layers
    gen = torch.Generator().manual_seed(10 + rank)  # each rank its own micro-batch
    ids = torch.randint(0, VOCAB, (2, 7 + 2 * rank), generator=gen)
    local = HealthMonitor(ddp, every=1, mode="in-step", rank_zero_only=False)
    reduced = HealthMonitor(ddp, every=1, mode="in-step", processes="all-reduce")
    result = {"local": observed_step(ddp, layers, local, ids)}
    reduced.steps = 1  # its first observation is the run's step 2
    result["all-reduce"] = observed_step(ddp, layers, reduced, ids)
    (out / f"rank-{rank}.json").write_text(json.dumps(result))


def worker(rank, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{out / 'rendezvous'}", rank=rank, world_size=2)
    try:
        observe(rank, out)
    finally:
        gc.collect()  # DDP sits in reference cycles; alive past destroy_process_group, torch aborts exits
        dist.destroy_process_group()


if __name__ == "__main__":
    worker(int(sys.argv[1]), pathlib.Path(sys.argv[2]))
