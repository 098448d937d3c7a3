"""Throughput of the embedded backbone (run with: pytest -o addopts="" tests/benchmarks --benchmark-only).

Measures real work on 64 synthetic NLI pairs: training and evaluation examples/s, dense and
with 50 % IMP masks attached, and evaluation with dynamic vs fixed (max_length) padding.
``extra_info['examples_per_s']`` is what to compare across machines.
"""

import pytest
import torch

from bench.model.backbone import load_classifier, load_tokenizer, resolve
from bench.model.masking import apply_masks, magnitude_masks
from bench.model.predict import autocast, collate, encode, predict_logits
from bench.registry import TASKS
from tests.conftest import REAL_DATA

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


def _step_fn(bb, tok, examples, masked: bool):
    """One optimizer step on the same 32 pairs: dense fine-tuning, or SRNet mask training
    (frozen weights, scores on the 36 encoder matrices and the head)."""
    from methods.srnet import attach_score_masks

    model = load_classifier(bb, 3, seed=0).train()
    if masked:
        for q in model.parameters():
            q.requires_grad_(False)
        params = [m.scores for m in attach_score_masks(model, "hard", 0.5, heads=True)]
    else:
        params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5)
    batch = collate(encode(tok, examples[:32], 64), tok.pad_token_id)
    y = torch.tensor([e.label for e in examples[:32]])

    def step():
        loss = torch.nn.functional.cross_entropy(model(**batch).logits, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def test_dense_finetuning_step(benchmark, setup):
    benchmark.group = "srnet step"
    benchmark.pedantic(_step_fn(*setup, masked=False), rounds=5, warmup_rounds=1)


def test_srnet_mask_training_step(benchmark, setup):
    """Target: a mask-training step at >= 0.9x the speed of a dense step. The two are
    timed in alternation and compared as the median of paired ratios, so that a busy machine
    slows both alike."""
    import statistics
    import time

    benchmark.group = "srnet step"
    dense, masked = _step_fn(*setup, masked=False), _step_fn(*setup, masked=True)

    def seconds(fn) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    dense(), masked()  # warm-up
    ratios = [seconds(dense) / seconds(masked) for _ in range(7)]
    benchmark.pedantic(masked, rounds=3, warmup_rounds=0)
    ratio = statistics.median(ratios)
    benchmark.extra_info["speed_vs_dense"] = ratio
    assert ratio >= 0.9, f"mask training runs at {ratio:.2f}x the dense speed"


# --- the adversarial suite's model wrapper ------------------------------------------------------
SHARED = REAL_DATA


def _attack_all(wrapper, examples):
    """TextFooler on every example; (outcomes, total queries)."""
    from collections import OrderedDict

    from suites.adversarial.recipes import Sources, build

    data = SHARED if (SHARED / "wordsub").is_dir() else None
    attack = build("textfooler", wrapper, Sources(data), pair=False).attack
    results = [attack.attack(OrderedDict([("text", e.text_a)]), e.label) for e in examples]
    return [(type(r).__name__, r.perturbed_result.num_queries) for r in results], sum(
        r.perturbed_result.num_queries for r in results)


@pytest.fixture(scope="module")
def attack_setup():
    from bench.data.examples import stratified_sample

    bb = resolve("minilm")
    tok = load_tokenizer(bb)
    model = load_classifier(bb, 2, seed=0).eval()  # the speed of queries, not of a good model
    examples = stratified_sample(TASKS.get("sent_synth").load(None).test, 12, seed=0)
    return model, tok, examples


def test_attack_queries_per_second_textattack_wrapper(benchmark, attack_setup):
    from suites.adversarial.resources import textattack

    model, tok, examples = attack_setup
    benchmark.group = "attack queries"
    wrapper = textattack().models.wrappers.HuggingFaceModelWrapper(model, tok)
    _, queries = benchmark.pedantic(lambda: _attack_all(wrapper, examples), rounds=1, iterations=1)
    benchmark.extra_info["queries_per_s"] = queries / benchmark.stats["mean"]


def test_attack_queries_per_second_harness_wrapper(benchmark, attack_setup):
    """Target: >= 3x the queries per second of TextAttack's HuggingFaceModelWrapper on
    the same attack, with identical per-example outcomes and query counts."""
    import time

    from suites.adversarial.resources import textattack
    from suites.adversarial.wrapper import make_wrapper

    model, tok, examples = attack_setup
    benchmark.group = "attack queries"
    t0 = time.perf_counter()
    theirs, queries = _attack_all(textattack().models.wrappers.HuggingFaceModelWrapper(model, tok), examples)
    hf_seconds = time.perf_counter() - t0
    ours, _ = benchmark.pedantic(lambda: _attack_all(make_wrapper(model, tok, 48, torch.device("cpu")), examples),
                                 rounds=1, iterations=1)
    speedup = hf_seconds / benchmark.stats["mean"]
    benchmark.extra_info.update(queries_per_s=queries / benchmark.stats["mean"], speedup_vs_textattack=speedup)
    assert ours == theirs
    assert speedup >= 3, f"harness wrapper is only {speedup:.1f}x TextAttack's"


# --- structured compression: what really gets faster ----------------------------------------------
@pytest.mark.parametrize("variant", ["full", "heads_pruned_20", "half_depth_student", "unstructured_90"])
def test_inference_of_compressed_models(benchmark, setup, variant):
    """Same 64 pairs, batch 32: the full model, 20 % of heads removed (Michel et al.), a 3-layer
    student (truncated and distilled students share this shape), and 90 % unstructured IMP masks
    (zeros in dense kernels: no faster)."""
    from bench.model.heads import heads_to_prune, remove_heads
    from bench.model.masking import bake
    from methods.distilled import truncate

    bb, tok, examples = setup
    model = load_classifier(bb, 3, seed=0).eval()
    if variant == "heads_pruned_20":
        gen = torch.Generator().manual_seed(0)
        remove_heads(model, heads_to_prune(torch.rand(6, 12, generator=gen), 0.2, allow_empty_layers=False))
    elif variant == "half_depth_student":
        truncate(model, 3)
    elif variant == "unstructured_90":
        apply_masks(model, magnitude_masks(model, 0.9))
        bake(model)
    benchmark.group = "compressed inference"
    benchmark.pedantic(lambda: predict_logits(model, tok, examples, 128, torch.device("cpu"), "fp32", batch_size=32),
                       rounds=3, warmup_rounds=1)
    benchmark.extra_info["examples_per_s"] = N / benchmark.stats["mean"]
    benchmark.extra_info["params_m"] = sum(p.numel() for p in model.parameters()) / 1e6
