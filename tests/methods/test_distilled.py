"""Half-depth students: truncated, distilled task-agnostically, or given by the user."""

import json

import pytest

from bench.errors import BenchError


def test_truncated_student_has_the_labelled_depth_and_size(runner, run_spec):
    rec = runner.run(run_spec("distilled", params={"epochs": 2, "batch_size": 8}))
    full = runner.run(run_spec("finetune"))
    assert rec.label == "truncated student (half layers)" and rec.method_info["layers"] == 1
    assert rec.method_info["teacher_layers"] == 2 and "first 1 of 2 layers" in rec.method_info["student"]
    assert rec.metrics["eff/params_m"] < full.metrics["eff/params_m"]
    model = runner.candidate(run_spec("distilled", params={"epochs": 2, "batch_size": 8})).model
    assert model.config.num_hidden_layers == 1 == len(model.bert.encoder.layer)  # the model, not only its label


def test_distilled_student_is_built_once_and_matches_its_label(runner, run_spec, monkeypatch, tmp_path):
    import methods.distilled as d

    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(d, "DISTILL_STEPS", 3)
    monkeypatch.setattr(d, "HELD_OUT", 10)
    cand = runner.candidate(run_spec("distilled", max_examples=600, params={"epochs": 1, "batch_size": 32,
                                                                              "student": "distilled"}))
    assert cand.info["layers"] == 1 and cand.model.config.num_hidden_layers == 1
    assert "1-layer student distilled from" in cand.info["student"]
    assert -1 <= cand.info["distillation"]["held_out_cosine_final_layer"] <= 1
    assert cand.info["distillation"]["mapping"] == [2]  # student layer 1 <- teacher layer 2
    monkeypatch.setattr(d, "distill_student", lambda *a, **k: pytest.fail("the student was distilled a second time"))
    other = runner.candidate(run_spec("distilled", max_examples=600, params={"epochs": 2, "batch_size": 32,
                                                                               "student": "distilled"}))
    assert other.lineage["key"] != cand.lineage["key"]  # another run, the same cached student
    assert other.info["student_cache"] == cand.info["student_cache"]
    assert str(tmp_path) not in json.dumps(cand.info)  # a record names no local path
    assert other.info["distillation"] == cand.info["distillation"]


def test_a_student_deeper_than_the_teacher_is_an_error(runner, run_spec):
    with pytest.raises(BenchError, match="deeper than the 2-layer backbone"):
        runner.candidate(run_spec("distilled", params={"epochs": 1, "batch_size": 8, "layers": 3}))


def test_a_user_checkpoint_deeper_than_the_teacher_is_an_error(runner, run_spec, tmp_path, tiny_bert):
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(tmp_path / "deep")
    tok.save_pretrained(tmp_path / "deep")
    with pytest.raises(BenchError, match="more than the 2-layer backbone"):
        runner.candidate(run_spec("distilled", params={"epochs": 1, "batch_size": 8, "student": str(tmp_path / "deep")}))
