"""The GPU path's pieces, checked where they can be without a GPU: a CPU run keeps its exact
batches and optimizer, the CUDA settings are the ones asked for, length buckets see every
example once and pad less, and a compiled forward computes what the eager one does."""

from __future__ import annotations

import pytest
import torch

from bench.cli import main
from bench.model import accel
from bench.model.backbone import load_classifier, resolve

CUDA = torch.device("cuda")
CPU = torch.device("cpu")


def test_a_cpu_epoch_is_the_seeded_permutation_cut_in_order():
    """What every committed CPU record trained on: one randperm per epoch, cut consecutively."""
    got = accel.batch_order([5] * 70, 32, torch.Generator().manual_seed(3), bucket=False)
    perm = torch.randperm(70, generator=torch.Generator().manual_seed(3))
    assert [b.tolist() for b in got] == [perm[:32].tolist(), perm[32:64].tolist(), perm[64:].tolist()]


def test_length_buckets_see_every_example_once_pad_less_and_are_seeded():
    lengths = torch.randint(8, 128, (5000,), generator=torch.Generator().manual_seed(0)).tolist()

    def order(bucket, seed=1):
        return accel.batch_order(lengths, 32, torch.Generator().manual_seed(seed), bucket=bucket)

    def padded(batches):
        return sum(len(b) * max(lengths[i] for i in b.tolist()) for b in batches)

    bucketed = order(True)
    assert sorted(i for b in bucketed for i in b.tolist()) == list(range(5000))
    assert max(len(b) for b in bucketed) == 32
    assert padded(bucketed) < 0.7 * padded(order(False))  # measured: about 0.55 on uniform lengths
    assert [b.tolist() for b in bucketed] == [b.tolist() for b in order(True)]
    assert [b.tolist() for b in bucketed] != [b.tolist() for b in order(True, seed=2)]
    firsts = [b[0].item() for b in bucketed]
    assert firsts != sorted(firsts, key=lambda i: lengths[i])  # batches shuffled, not short to long


def test_adamw_is_fused_on_cuda_only():
    w = torch.nn.Parameter(torch.zeros(2, 2))
    assert accel.adamw([{"params": [w]}], 1e-3, CUDA).defaults["fused"] is True
    assert not accel.adamw([{"params": [w]}], 1e-3, CPU).defaults["fused"]


def test_tf32_is_switched_on_for_cuda_and_left_alone_on_cpu():
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        accel.setup(CPU)
        assert not torch.backends.cuda.matmul.allow_tf32
        accel.setup(CUDA)
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        assert torch.get_float32_matmul_precision() != "highest"  # what TF32 matmuls report
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_cpu_batches_are_moved_as_they_are():
    batch = {"input_ids": torch.arange(6).view(2, 3)}
    assert torch.equal(accel.to_device(batch, CPU)["input_ids"], batch["input_ids"])


def test_every_architecture_loads_with_sdpa_attention(tiny_backbones):
    for name, path in tiny_backbones.items():
        model = load_classifier(resolve(str(path)), 3, seed=0)
        assert model.config._attn_implementation == "sdpa", name


def test_a_compiled_forward_computes_what_the_eager_one_does(tiny_bert):
    model = load_classifier(resolve(str(tiny_bert)), 3, seed=0).eval()
    fast = accel.compiled(model, True)
    assert accel.compiled(model, False) is model
    for width in (7, 12):  # two lengths: dynamic shapes, no recompile needed to be right
        ids = torch.randint(5, 90, (4, width), generator=torch.Generator().manual_seed(width))
        with torch.no_grad():
            torch.testing.assert_close(fast(input_ids=ids).logits, model(input_ids=ids).logits, rtol=1e-4, atol=1e-5)


def test_compile_is_part_of_a_run_s_identity_only_when_on(run_spec, tmp_path):
    from bench.core.runner import Runner
    from bench.errors import BenchError

    plain, compiled = run_spec(method="finetune", device="cuda"), run_spec(method="finetune", device="cuda", compile=True)
    runner = Runner(tmp_path, progress=False, log=lambda m: None)
    assert "compile" not in plain.config() and compiled.config()["compile"] is True
    assert runner.run_id(plain) != runner.run_id(compiled)
    with pytest.raises(BenchError, match="--compile needs --device cuda"):
        run_spec(method="finetune", compile=True)  # on CPU: refused, not silently slower or failing in inductor


def test_a_sweep_spec_s_compile_must_be_a_boolean(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('[[group]]\nmethod = "finetune"\nsuite = "ood"\ncompile = "yes"\n')
    assert main(["sweep", str(spec), "--dry-run", "--out", str(tmp_path / "out")]) == 2
    assert "compile expects bool (true or false), got 'yes'" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", [["run", "--method", "finetune", "--suite", "ood"], ["sweep", "sweeps/smoke.toml"]])
def test_cuda_without_a_gpu_fails_in_one_line(cmd, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main([*cmd, "--device", "cuda", "--out", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err
    assert "no CUDA device" in err and "Traceback" not in err
    assert not list(tmp_path.glob("out/records/*.json"))
