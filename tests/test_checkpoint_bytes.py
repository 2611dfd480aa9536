# SPDX-License-Identifier: MIT
"""The bytes of a checkpoint are the format's, not the writer's: a saved state equals, byte for
byte, the committed ``data/checkpoint-format1.safetensors`` written when checkpoints went
through the safetensors library, in every fresh ``python -P`` process; the committed file loads
to the same state. Regenerate it only with a CHECKPOINT_FORMAT bump (``python -P
tests/test_checkpoint_bytes.py PATH`` writes it)."""

import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import safetensors
import safetensors.numpy

from pydepth import checkpoint

GOLDEN = pathlib.Path(__file__).resolve().parent / "data" / "checkpoint-format1.safetensors"

#: A depth-initialized model after two AdamW updates under a schedule, with its generator,
#: record, step and an extra; the writer's version pinned, the one field that names the writer.
SAVE = """
    import sys
    import numpy as np
    from pydepth import DecoderConfig, DepthInitializationBudget, Fresh, SplitMix64, checkpoint
    from pydepth import initialize_depth_scaled
    from pydepth.optim import AdamW, warmup_cosine
    checkpoint._pydepth_version = lambda: "golden"
    cfg = DecoderConfig(16, 4, 1, 4, 2, 4)
    init = initialize_depth_scaled(Fresh(cfg, DepthInitializationBudget(10**6, 64), SplitMix64(7)))
    opt = AdamW(init.model.parameters, lr=warmup_cosine(1e-2, 1, 4), weight_decay=0.05)
    rng = SplitMix64(8)
    for _ in range(2):
        ids = np.array([[rng.next_u64() % 16 for _ in range(5)]], dtype=np.int64)
        opt.zero_grad()
        init.model.loss(ids[:, :-1], ids[:, 1:]).backward()
        opt.step()
    checkpoint.save(sys.argv[1], init, optimizer=opt, rng=rng, step=2, extra={"b": [1, 2.5], "a": None})
"""


def save_in_fresh_process(path):
    proc = subprocess.run(
        [sys.executable, "-P", "-c", textwrap.dedent(SAVE), str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return pathlib.Path(path).read_bytes()


def test_a_saved_state_equals_the_committed_checkpoint_byte_for_byte_in_every_fresh_process(tmp_path):
    golden = GOLDEN.read_bytes()
    first = save_in_fresh_process(tmp_path / "a.safetensors")
    second = save_in_fresh_process(tmp_path / "b.safetensors")
    assert first == second
    assert first == golden, f"{len(first)} bytes vs the committed {len(golden)}"


def test_the_committed_checkpoint_loads_to_the_state_it_was_written_from(tmp_path):
    save_in_fresh_process(tmp_path / "a.safetensors")
    ours, committed = checkpoint.load(tmp_path / "a.safetensors"), checkpoint.load(GOLDEN)
    for p, q in zip(ours.model.parameters, committed.model.parameters):
        assert p.name == q.name and np.array_equal(p.value.view(np.uint64), q.value.view(np.uint64)), p.name
    assert committed.step == 2 and committed.rng == ours.rng and committed.pydepth_version == "golden"
    assert committed.extra == {"b": [1, 2.5], "a": None} and committed.record == ours.record
    assert committed.optimizer_state["step"] == ours.optimizer_state["step"] == 2


def test_the_committed_checkpoint_is_what_the_safetensors_library_writes_for_its_tensors_and_metadata():
    with safetensors.safe_open(str(GOLDEN), framework="np") as f:
        names, metadata = f.keys(), f.metadata()
        tensors = {name: f.get_tensor(name) for name in names}
    assert set(metadata) == {"pydepth"}  # one entry: the library orders several differently per process
    assert safetensors.numpy.save(tensors, metadata=metadata) == GOLDEN.read_bytes()


if __name__ == "__main__":
    save_in_fresh_process(sys.argv[1])
