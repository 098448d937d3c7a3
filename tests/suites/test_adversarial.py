"""The adversarial suite on a tiny BERT fine-tuned on the embedded sentiment task."""

import json
from pathlib import Path

import pytest

from bench.data.examples import Example
from bench.errors import BenchError
from bench.spec.run import grid, resolve
from bench.store.records import load_predictions
from suites.adversarial import AttackParams, load_rows, summarize
from tests.conftest import REAL_DATA

SHARED = REAL_DATA
DATA = str(SHARED) if (SHARED / "wordsub").is_dir() else None  # else the GloVe fallback
FT = {"epochs": 4, "batch_size": 16, "lr": 1e-3}


@pytest.fixture
def attack_spec(tiny_bert):
    def make(recipe="textfooler", out_params=None, **suite_params):
        return resolve("finetune", "adversarial", task="sent_synth", backbone=str(tiny_bert), max_examples=200,
                       params=FT, data_dir=DATA, suite_params={"n": 8, "recipes": recipe, **suite_params},
                       **(out_params or {}))

    return make


def test_metrics_by_hand():
    rows = [{"result": "successful", "queries": 10}, {"result": "failed", "queries": 30},
            {"result": "skipped", "queries": 1}, {"result": "successful", "queries": 20}]
    m = summarize(rows)
    assert m["clean"] == 0.75  # 3 of 4 correct before the attack
    assert m["aua"] == 0.25  # 1 of 4 still correct after it
    assert m["suc"] == pytest.approx(2 / 3)  # skipped examples are not attacked
    assert m["queries"] == 20.0  # mean over attacked examples
    assert "words" not in m  # the rows keep no text: no word count to divide by


def test_record_numbers_are_recomputed_from_the_per_example_file(runner, attack_spec):
    rec = runner.run(attack_spec())
    rows = [r for r in load_predictions(runner.out / "records", rec) if r["set"] != "test"]
    assert len(rows) == 8 and {r["set"] for r in rows} == {"textfooler"}
    clean = [r for r in load_predictions(runner.out / "records", rec) if r["set"] == "test"]
    assert len(clean) == len(runner.task_data(attack_spec()).test)  # the clean pass is kept too
    assert rec.metrics["id"] == sum(r["gold"] == r["pred"] for r in clean) / len(clean)
    assert {f"textfooler/{k}": v for k, v in summarize(rows).items()} == {
        k: v for k, v in rec.metrics.items() if k.startswith("textfooler/")}
    assert rec.details["sample_ids"] == [r["uid"] for r in rows]
    labels = [r["gold"] for r in rows]
    assert labels.count(0) == labels.count(1) == 4  # stratified, not the first 8 of the file
    assert rec.details["recipes"]["textfooler"]["settings"]["textattack"] == "0.3.11"
    assert {r["role"] for r in rec.details["recipes"]["textfooler"]["resources"]} == {"word_swap", "pos", "sentence_encoder"}
    assert rec.details["resources_tag"].startswith("fallback")
    assert not (runner.out / "partial" / rec.run_id).exists()  # folded into the predictions file


def test_an_interrupted_attack_resumes_and_equals_an_uninterrupted_one(tmp_path, attack_spec, monkeypatch):
    from bench.core.runner import Runner
    from suites.adversarial.resources import textattack

    spec = attack_spec("textbugger")  # random character edits: seeding per example matters
    full = Runner(tmp_path / "a", progress=False, log=lambda m: None).run(spec)

    Attack = textattack().Attack
    real = Attack.attack
    calls = []

    def dies_on_the_fourth(self, example, label):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(self, example, label)

    runner = Runner(tmp_path / "b", progress=False, log=lambda m: None)
    monkeypatch.setattr(Attack, "attack", dies_on_the_fourth)
    with pytest.raises(KeyboardInterrupt):
        runner.run(spec)
    partial = next((tmp_path / "b" / "partial").glob("*/textbugger.jsonl"))
    lines = partial.read_text().splitlines()
    assert len(lines) == 1 + 3 and json.loads(lines[0])["recipe"] == "textbugger"  # a header, then 3 examples
    assert len(load_rows(partial, json.loads(lines[0]))) == 3
    assert load_rows(partial, {**json.loads(lines[0]), "sample_seed": 99}) == []  # other settings: start over
    with partial.open("a") as f:
        f.write('{"set": "textbugger", "uid": "torn')  # killed in the middle of a write
    monkeypatch.setattr(Attack, "attack", lambda self, ex, y: calls.append(1) or real(self, ex, y))
    calls.clear()
    resumed = runner.run(spec)
    assert len(calls) == 8 - 3  # only the examples not finished before
    scores = lambda r: {k: v for k, v in r.metrics.items() if not k.startswith("eff/")}  # noqa: E731  (timings vary)
    assert scores(resumed) == scores(full)
    a = load_predictions(tmp_path / "a" / "records", full)
    b = load_predictions(tmp_path / "b" / "records", resumed)
    strip = lambda rows: [{k: v for k, v in x.items() if k != "seconds"} for x in rows]  # noqa: E731
    assert strip(a) == strip(b)


def test_two_processes_resuming_one_attack_journal_do_not_share_a_staging_file(tmp_path):
    """The journal of finished examples is rewritten on resume; a fixed staging name (``<name>.tmp``)
    would be shared by two runs of the same job on one ``--out``. Here that name is taken."""
    from suites.adversarial import Adversarial

    sample = [Example(f"u{i}", f"text {i}", None, i % 2) for i in range(2)]
    header = {"recipe": "textfooler", "settings": {}, "resources": [], "sample_seed": 0}
    rows = [{"set": "textfooler", "uid": e.uid, "gold": e.label, "result": "failed"} for e in sample]
    path = tmp_path / "textfooler.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [header, *rows]) + '{"torn', encoding="utf-8")
    (tmp_path / "textfooler.jsonl.tmp").mkdir()  # the other run's staging file, mid-write
    done = Adversarial._attack(None, None, "textfooler", sample, False, path, header, False, 0)  # nothing left to attack
    assert done == rows
    assert path.read_text(encoding="utf-8").splitlines() == [json.dumps(r) for r in [header, *rows]]  # torn line dropped
    assert sorted(p.name for p in tmp_path.iterdir()) == ["textfooler.jsonl", "textfooler.jsonl.tmp"]  # nothing left behind


def test_harness_and_textattack_attacker_agree_example_by_example(runner, attack_spec):
    """Same recipe, model and examples through TextAttack's own Attacker with its
    HuggingFaceModelWrapper, and through the harness: same outcomes and query counts."""
    from suites.adversarial.recipes import Sources, build
    from suites.adversarial.resources import textattack

    spec = attack_spec()
    rec = runner.run(spec)
    rows = [r for r in load_predictions(runner.out / "records", rec) if r["set"] != "test"]
    cand = runner.candidate(spec)
    task = runner.task_data(spec)
    by_uid = {e.uid: e for e in task.test}
    ta = textattack()
    cand.tokenizer.model_max_length = 128  # the tiny BERT's positions; TextAttack pads to this
    hf = ta.models.wrappers.HuggingFaceModelWrapper(cand.model.eval(), cand.tokenizer)
    attack = build("textfooler", hf, Sources(Path(DATA) if DATA else None), pair=False).attack
    dataset = ta.datasets.Dataset([(by_uid[u].text_a, by_uid[u].label) for u in rec.details["sample_ids"]])
    args = ta.AttackArgs(num_examples=len(dataset), silent=True, disable_stdout=True)
    results = ta.Attacker(attack, dataset, args).attack_dataset()
    theirs = [(type(r).__name__.removesuffix("AttackResult").lower(), r.perturbed_result.num_queries) for r in results]
    assert theirs == [(r["result"], r["queries"]) for r in rows]
    assert {r for r, _ in theirs} != {"skipped"}  # something was really attacked


@pytest.fixture
def tiny_mlm(tiny_bert, tmp_path) -> Path:
    """A random one-layer masked LM with the tiny BERT's tokenizer: a user-given BERT-Attack MLM."""
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    BertForMaskedLM(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64)).save_pretrained(tmp_path / "mlm", safe_serialization=True)
    tok.save_pretrained(tmp_path / "mlm")
    return tmp_path / "mlm"


@pytest.mark.parametrize("recipe", ["textfooler", "bert_attack", "textbugger"])
def test_pair_tasks_perturb_only_the_hypothesis(recipe, tiny_mlm):
    """Against a model whose output hangs on every character of both sentences (so an attack
    that may touch the premise will), the premise comes back untouched in every result, and
    some successful attack did change the hypothesis (so the check is not vacuous).
    BERT-Attack proposes words from a tiny random masked LM: any word will do here."""
    import zlib

    import numpy as np

    from bench.registry import TASKS
    from suites.adversarial import _input
    from suites.adversarial.recipes import Sources, build
    from suites.adversarial.resources import textattack

    ta = textattack()

    class Fickle(ta.models.wrappers.ModelWrapper):
        model = None

        def __call__(self, texts):
            hashes = [zlib.crc32("|".join(t).encode()) for t in texts]
            return np.array([[h % 7, (h >> 3) % 7, (h >> 6) % 7] for h in hashes], dtype=float)

    sources = Sources(Path(DATA) if DATA else None, mlm=str(tiny_mlm))
    attack = build(recipe, Fickle(), sources, pair=True).attack
    examples = TASKS.get("nli_synth").load(None).test[:8]
    results = [(ex, attack.attack(_input(ex, pair=True), ex.label)) for ex in examples]
    columns = lambda res: dict(zip(res.perturbed_result.attacked_text.column_labels,  # noqa: E731
                                   res.perturbed_result.attacked_text.tokenizer_input, strict=True))
    for ex, res in results:
        assert columns(res)["premise"] == ex.text_a
    changed = [res for ex, res in results if type(res).__name__ == "SuccessfulAttackResult"
               and columns(res)["hypothesis"] != ex.text_b]
    assert changed, [type(r).__name__ for _, r in results]


def test_pair_tasks_record_the_hypothesis_as_the_attacked_text(runner, tiny_bert):
    spec = resolve("finetune", "adversarial", task="nli_synth", backbone=str(tiny_bert), max_examples=60,
                   params=FT, data_dir=DATA, suite_params={"n": 6, "recipes": "textfooler"})
    rec = runner.run(spec)
    assert rec.details["recipes"]["textfooler"]["settings"]["hypothesis_only"] is True
    hypotheses = {e.uid: e.text_b for e in runner.task_data(spec).test}
    rows = [r for r in load_predictions(runner.out / "records", rec) if r["set"] != "test"]
    assert len(rows) == 6 and all(r["original"] == hypotheses[r["uid"]] for r in rows)


@pytest.mark.parametrize(
    "suite, params, message",
    [
        ("adversarial", {"recipes": "textfool"}, "unknown recipe 'textfool'; did you mean 'textfooler'?"),
        ("adversarial", {"n": -1}, "n must be at least 0"),
        ("adversarial", {"mlm": "/no/such/model"}, "--suite-param mlm=/no/such/model: no such file or directory"),
        ("adversarial", {"nn": 5}, "unknown parameter 'nn' for suite 'adversarial'; did you mean 'n'?"),
        ("ood", {"n": 5}, "unknown parameter 'n' for suite 'ood'"),
    ],
)
def test_bad_suite_parameters_fail_before_any_work(tiny_bert, suite, params, message):
    with pytest.raises(BenchError, match=message.replace("?", r"\?")):
        grid(method="finetune", suite=suite, sparsity=None, seed=[0], backbone=str(tiny_bert), suite_params=params)


def test_more_examples_than_the_test_split_is_an_error(runner, attack_spec):
    with pytest.raises(BenchError, match=r"n=500 is larger than the test split of 'sent_synth' \(200 examples\)"):
        runner.run(attack_spec(n=500))


def test_the_default_sample_fits_a_small_test_split(tiny_bert):
    from bench.core.runner import Runner
    from bench.registry import SUITES
    from suites.adversarial import AttackParams

    spec = resolve("finetune", "adversarial", task="sent_synth", backbone=str(tiny_bert), max_examples=20)
    task = Runner(Path("unused"), progress=False, log=lambda m: None).task_data(spec)
    assert len(task.test) == 20 and AttackParams().size(len(task.test)) == 20 and AttackParams().size(872) == 100
    SUITES.get("adversarial").check(AttackParams(recipes="textfooler"), task, None)  # no n the user never gave


def test_what_cannot_attack_fails_before_anything_trains(tiny_bert, tmp_path, capsys, monkeypatch):
    """A 20-example task has too little text for BERT-Attack's masked-LM head: said before the
    ticket is searched, trained and attacked by TextFooler, not after."""
    from bench.cli import main
    from suites.adversarial import mlm

    monkeypatch.setattr(mlm, "OFFICIAL", "/no/such/bert-base-uncased")  # as on a machine without it
    argv = ["run", "--method", "robust_tickets", "--suite", "adversarial", "--task", "sent_synth", "--max-examples", "20",
            "--suite-param", "n=10", "--backbone", str(tiny_bert), "--out", str(tmp_path), "--quiet"]
    assert main(argv) == 2
    assert "too little text" in capsys.readouterr().err
    assert not (tmp_path / "artifacts").exists()  # nothing was built


def test_a_task_without_a_test_split_is_an_error(runner, attack_spec, monkeypatch):
    import dataclasses

    from bench.core.runner import Runner

    real = Runner.task_data
    monkeypatch.setattr(Runner, "task_data", lambda self, spec: dataclasses.replace(real(self, spec), test=[]))
    with pytest.raises(BenchError, match="no test split to attack"):
        runner.run(attack_spec())


def test_a_user_masked_lm_drives_bert_attack(runner, attack_spec, tiny_mlm):
    rec = runner.run(attack_spec("bert_attack", mlm=str(tiny_mlm), n=4))
    used = {r["role"]: r for r in rec.details["recipes"]["bert_attack"]["resources"]}
    assert used["mlm"]["kind"] == "user" and used["mlm"]["source"] == str(tiny_mlm)
    assert rec.details["recipes"]["bert_attack"]["settings"]["method"] == "bert-attack"


def test_attack_params_defaults_are_the_cpu_sizes():
    p = AttackParams()
    assert p.n == 0 and p.size(872) == 100 and p.size(40) == 40 and p.chosen(("a", "b")) == ["a", "b"]


def test_glove_fallback_neighbours_are_other_words():
    """A swap to punctuation deletes the word, and TextAttack's windowed sentence-encoder
    constraint then fails on a text with no modified index (seen with 'great' -> a dash)."""
    from suites.adversarial.embeddings import _glove, make_glove_embedding
    from suites.adversarial.resources import textattack

    textattack()
    emb = make_glove_embedding(_glove())
    for word in ("great", "bad", "film", "but"):
        neighbours = [emb.index2word(j) for j in emb.nearest_neighbours(emb.word2index(word), 50)]
        assert len(neighbours) == 50 and word not in neighbours
        assert all(w.isalpha() for w in neighbours), neighbours


def test_bert_attack_s_lazy_sub_word_swap_equals_textattack_s_and_stops_early(tiny_mlm, monkeypatch):
    """The harness's BERT-Attack swap proposes exactly TextAttack 0.3.11's candidates (words of
    one and of three sub-words), but for a 7-piece word it stops after its 8 candidates instead
    of walking all 8^7 combinations (10 minutes for one SST-2 word)."""
    from transformers import AutoTokenizer, BertForMaskedLM

    from suites.adversarial.recipes import _lazy_bert_attack_swap
    from suites.adversarial.resources import textattack

    ta = textattack()
    mlm, tok = BertForMaskedLM.from_pretrained(tiny_mlm), AutoTokenizer.from_pretrained(tiny_mlm)
    kw = dict(method="bert-attack", masked_language_model=mlm, tokenizer=tok, max_candidates=8)
    stock, lazy = ta.transformations.WordSwapMaskedLM(**kw), _lazy_bert_attack_swap(ta)(**kw)
    text = ta.shared.AttackedText("an unwatchable , overproduced film buoyed by nothing")
    every = range(len(text.words))
    got = [t.text for t in lazy._get_transformations(text, every)]
    assert got == [t.text for t in stock._get_transformations(text, every)]
    assert {w for t in got for w in t.split()} - set(text.text.split())  # some words were swapped
    calls = []
    convert = tok.convert_ids_to_tokens
    monkeypatch.setattr(tok, "convert_ids_to_tokens", lambda ids, **k: calls.append(1) or convert(ids, **k))
    long = ta.shared.AttackedText("the ooky-spookies film")
    assert len(lazy._get_transformations(long, [1])) > 0 and len(calls) < 100


def test_a_users_word_list_pickle_is_read_as_plain_data_only(tmp_path):
    """TextAttack's paragramcf word list is a pickle: a pickle that names a class or function (how a
    pickle runs code) is refused, a plain word -> index dict is read."""
    import os
    import pickle

    from suites.adversarial.embeddings import word_list

    plain = tmp_path / "ok.pickle"
    plain.write_bytes(pickle.dumps({"good": 0, "bad": 1}))
    assert word_list(plain) == {"good": 0, "bad": 1}

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo owned",))

    evil = tmp_path / "evil.pickle"
    evil.write_bytes(pickle.dumps({"x": Evil()}))
    with pytest.raises(BenchError, match="refusing to load"):
        word_list(evil)


def test_without_the_attacks_extra_the_suite_is_one_line_saying_what_to_install(monkeypatch, capsys, tmp_path):
    import importlib
    import importlib.metadata

    from bench.cli import main

    resources = importlib.import_module("suites.adversarial.resources")

    def absent(name):
        if name == "textattack":
            raise importlib.metadata.PackageNotFoundError(name)
        return importlib.metadata.version(name)

    monkeypatch.setattr(resources, "version", absent)
    code = main(["run", "--method", "finetune", "--suite", "adversarial", "--task", "sent_synth", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1] == ("bench: error: the adversarial suite needs TextAttack, an optional dependency: "
                                    "pip install -e '.[attacks]' (docs/install.md)")
    assert not (tmp_path / "records").exists()  # nothing trained first
