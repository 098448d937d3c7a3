"""Throughput of the embedded backbone (run with: pytest -o addopts="" tests/benchmarks --benchmark-only).

Measures real work on 64 synthetic NLI pairs: training and evaluation examples/s, dense and
with 50 % IMP masks attached, and evaluation with dynamic vs fixed (max_length) padding.
``extra_info['examples_per_s']`` is what to compare across machines.
"""

import pytest
import torch

from bench.backbone import load_classifier, load_tokenizer, resolve
from bench.masking import apply_masks, magnitude_masks
from bench.predict import autocast, collate, encode, predict_logits
from bench.registry import TASKS

N = 64


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    bb = resolve("minilm")
    tok = load_tokenizer(bb)
    examples = TASKS.get("nli_synth").load(None).limited(N).train[:N]
    return bb, tok, examples


def _model(bb, masked: bool):
    model = load_classifier(bb, 3, seed=0)
    if masked:
        apply_masks(model, magnitude_masks(model, 0.5))
    return model


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("masked", [False, True], ids=["dense", "masked50"])
def test_train_throughput(benchmark, setup, masked, precision):
    bb, tok, examples = setup
    model = _model(bb, masked).train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    enc = encode(tok, examples, 64)
    y = torch.tensor([e.label for e in examples])

    def epoch():
        for s in range(0, N, 32):
            batch = collate(enc[s : s + 32], tok.pad_token_id)
            with autocast(torch.device("cpu"), precision):
                loss = torch.nn.functional.cross_entropy(model(**batch).logits.float(), y[s : s + 32])
            loss.backward()
            opt.step()
            opt.zero_grad()

    benchmark.pedantic(epoch, rounds=3, warmup_rounds=1)
    benchmark.extra_info["examples_per_s"] = N / benchmark.stats["mean"]


@pytest.mark.parametrize("padding", ["dynamic", "fixed128"])
@pytest.mark.parametrize("masked", [False, True], ids=["dense", "masked50"])
def test_eval_throughput(benchmark, setup, masked, padding):
    bb, tok, examples = setup
    model = _model(bb, masked)
    run = lambda: predict_logits(model, tok, examples, 128, torch.device("cpu"), "fp32",  # noqa: E731
                                 batch_size=32, fixed_padding=padding == "fixed128")
    benchmark.pedantic(run, rounds=3, warmup_rounds=1)
    benchmark.extra_info["examples_per_s"] = N / benchmark.stats["mean"]
