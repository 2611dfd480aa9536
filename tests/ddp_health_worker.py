# SPDX-License-Identifier: MIT
"""Run by tests/test_torch_callbacks.py: the same tiny float64 Llama trained six SGD steps by two
gloo processes under DistributedDataParallel (each on half of every batch) and by one process
on whole batches, observed every 2 steps on a held batch. Writes, in the directory given:
zero-{rank}.jsonl (default monitor: rank 0 only), all-{rank}.jsonl (every rank observes) and
single.jsonl (one process)."""
import gc
import os
import pathlib
import socket
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import transformers

from pydepth.torch.callbacks import HealthMonitor, JsonLinesSink

STEPS, EVERY, ROWS = 6, 2, 4


def model():
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=32, intermediate_size=48, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=50, max_position_embeddings=64)).double()


def data():
    gen = torch.Generator().manual_seed(1)
    held = torch.randint(0, 50, (2, 10), generator=gen)
    return held, [torch.randint(0, 50, (ROWS, 12), generator=gen) for _ in range(STEPS)]


def train(module, monitors, rows):
    _, batches = data()
    opt = torch.optim.SGD(module.parameters(), lr=0.5)
    for ids in batches:
        part = ids[rows]
        module(input_ids=part, labels=part).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        for m in monitors:
            m.step()


def train_ranks(rank, out):
    """This rank's share of the run; the DDP module and monitors die with this frame."""
    ddp = torch.nn.parallel.DistributedDataParallel(model())
    held, _ = data()
    monitors = [HealthMonitor(ddp, every=EVERY, batch=held, sinks=[JsonLinesSink(out / f"zero-{rank}.jsonl")]),
                HealthMonitor(ddp, every=EVERY, batch=held, rank_zero_only=False,
                              sinks=[JsonLinesSink(out / f"all-{rank}.jsonl")])]
    half = ROWS // 2
    train(ddp, monitors, slice(rank * half, (rank + 1) * half))
    for m in monitors:
        m.close()


def worker(rank, out, port):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        train_ranks(rank, out)
    finally:
        gc.collect()  # DDP sits in reference cycles; alive past destroy_process_group, torch aborts exits
        dist.destroy_process_group()


def main(out):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(out, port), nprocs=2, join=True)
    torch.set_num_threads(1)
    held, _ = data()
    single = HealthMonitor(model(), every=EVERY, batch=held, sinks=[JsonLinesSink(out / "single.jsonl")])
    train(single.model, [single], slice(0, ROWS))
    single.close()


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
