"""Post-training quantization: int8 dynamic really is int8 (and measured so), weight-only RTN is
round-to-nearest per group, and both start from the model they are compared with."""

from __future__ import annotations

import pytest
import torch

from bench.errors import BenchError
from bench.model.quant import quantized_linears, rtn
from bench.spec.run import resolve
from bench.store.records import load_predictions

RECIPE = {"epochs": 2, "batch_size": 8}


@pytest.mark.parametrize("bits", [8, 4, 3])
def test_rtn_rounds_each_group_to_its_own_grid_of_levels(bits):
    """Round-to-nearest with a scale and zero point per group of consecutive input weights
    (the asymmetric min-max quantizer of GPTQ's RTN baseline): at most 2^bits values a group, each
    weight within half a step of its own, zero kept exact."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(4, 64, generator=g) * torch.linspace(0.1, 5, 64)  # groups of very different ranges
    w[0, 0] = 0.0
    q = rtn(w, bits, 16)
    for group_w, group_q in zip(w.reshape(4, 4, 16).reshape(-1, 16), q.reshape(-1, 16), strict=True):
        step = (group_w.max().clamp(min=0) - group_w.min().clamp(max=0)) / (2**bits - 1)
        assert len(group_q.unique()) <= 2**bits
        assert (group_q - group_w).abs().max() <= step / 2 + 1e-6
    assert q[0, 0] == 0.0
    assert (rtn(w, 4, 16) - w).abs().mean() > (rtn(w, 8, 16) - w).abs().mean()  # fewer bits, more error
    assert (rtn(w, 3, 16) - w).abs().mean() > (rtn(w, 4, 16) - w).abs().mean()
    with pytest.raises(BenchError, match="group_size 48 does not divide"):
        rtn(w, 8, 48)


def test_int8_dynamic_quantizes_the_encoder_matrices_and_its_speed_is_measured_on_them(runner, run_spec):
    rec = runner.run(run_spec("quantize"))
    start = runner.run(run_spec("finetune"))
    cand = runner.candidate(run_spec("quantize").candidate())  # from the cache: quantized again on load
    assert quantized_linears(cand.model) == 2 * 6  # Q, K, V, attention-out, FFN in and out of both layers
    assert rec.label == "int8 dynamic" and rec.method_info["quantize"] == "int8_dynamic"
    assert rec.baseline == start.artifact["key"]  # compared with the model it quantized
    assert rec.metrics["eff/disk_mb"] < start.metrics["eff/disk_mb"]  # packed int8, not the float copy
    assert rec.metrics["eff/params_m"] == pytest.approx(start.metrics["eff/params_m"], rel=1e-6)
    a = {r["uid"]: r["pred"] for r in load_predictions(runner.out / "records", rec) if r["set"] == "test"}
    b = {r["uid"]: r["pred"] for r in load_predictions(runner.out / "records", start) if r["set"] == "test"}
    assert sum(a[u] == b[u] for u in a) >= 0.9 * len(a)  # int8 keeps nearly every prediction of the float model


def test_weight_only_is_simulated_and_says_so(runner, run_spec):
    rec = runner.run(run_spec("quantize", params={**RECIPE, "scheme": "weight", "bits": 4, "group_size": 16}))
    assert rec.label == "int4 weight-only g16 (simulated)" and rec.method_info["simulated"] is True
    cand = runner.candidate(run_spec("quantize", params={**RECIPE, "scheme": "weight", "bits": 4, "group_size": 16}).candidate())
    w = cand.model.bert.encoder.layer[0].attention.self.query.weight.detach()
    assert max(len(g.unique()) for g in w.reshape(-1, 16)) <= 16
    int3 = runner.run(run_spec("quantize", params={**RECIPE, "scheme": "weight", "bits": 3, "group_size": 16}))
    assert int3.label == "int3 weight-only g16 (simulated)"
    assert int3.method_info["packed_mb"] < rec.method_info["packed_mb"]  # 3 bits a weight, not 4
    for params, message in (({"scheme": "fp4"}, "scheme must be one of"), ({"scheme": "weight", "bits": 2}, "bits must be one of 8, 4, 3")):
        with pytest.raises(BenchError, match=message):
            run_spec("quantize", params={**RECIPE, **params})


def test_an_int8_candidate_is_not_exported_as_a_float_checkpoint(runner, run_spec, tmp_path, capsys):
    from bench.cli import main

    rec = runner.run(run_spec("quantize"))
    assert main(["export", str(runner.out / "records" / f"{rec.run_id}.json"), "--to", str(tmp_path / "x")]) == 2
    assert "dynamically quantized" in capsys.readouterr().err and not (tmp_path / "x").exists()


@pytest.mark.parametrize("arch", ["roberta", "distilbert"])
def test_other_architectures(arch, tiny_backbones, tmp_path):
    from bench.core.runner import Runner

    runner = Runner(tmp_path / "out", progress=False)
    cand = runner.candidate(resolve("quantize", "", backbone=str(tiny_backbones[arch]), max_examples=40, params=RECIPE))
    assert quantized_linears(cand.model) == 12


def test_a_checkpoint_is_quantized_as_it_is_and_compared_with_itself(runner, tiny_bert, tmp_path):
    from tests.methods.test_checkpoint import _checkpoint

    ckpt = _checkpoint(tiny_bert, tmp_path / "ckpt", ["entailment", "neutral", "contradiction"])
    rec = runner.run(resolve("quantize", "ood", backbone=str(ckpt), max_examples=40, params={"start": "checkpoint"}))
    start = runner.candidate(resolve("checkpoint", "", backbone=str(ckpt), max_examples=40))
    assert rec.label == "int8 dynamic, from checkpoint" and rec.baseline == start.lineage["key"]
