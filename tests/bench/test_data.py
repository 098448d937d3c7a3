from collections import Counter
from pathlib import Path

import pytest

from bench.data.examples import Example, find_file, read_rows, stratified_sample, to_examples
from bench.data.tasks.synthetic import generate
from bench.errors import BenchError
from bench.registry import TASKS


def test_synthetic_task_is_deterministic_and_plants_an_imperfect_shortcut():
    a, b = generate(0), generate(0)
    assert a == b
    train, _, _, ood = a
    full = [e for e in train if set(e.text_b.split()) <= set(e.text_a.split())]
    p_e = sum(e.label == 0 for e in full) / len(full)
    assert 0.75 <= p_e <= 0.85
    assert {e.group for e in full if e.label != 0} >= {"n_swap", "n_subsequence", "n_constituent"}
    assert all(set(e.text_b.split()) <= set(e.text_a.split()) for e in ood)
    cells = Counter((e.group, e.label) for e in ood)
    assert len(cells) == 6 and len(set(cells.values())) == 1
    train_words = {w for e in train for w in (e.text_a + " " + e.text_b).split()}
    assert {"baker", "surgeon", "supposedly", "beside"}.isdisjoint(train_words)


def test_stratified_sample_keeps_label_shares_and_is_seeded():
    exs = [Example(str(i), "a", "b", label=i % 3 if i < 90 else 0) for i in range(120)]
    s1, s2 = stratified_sample(exs, 40, 1), stratified_sample(exs, 40, 1)
    assert [e.uid for e in s1] == [e.uid for e in s2]
    assert len(s1) == 40
    share = Counter(e.label for e in s1)
    assert share[0] == round(40 * 60 / 120)
    assert [e.uid for e in s1] != [e.uid for e in exs[:40]]


def _write(path: Path, text: str, newline: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.replace("\n", newline).encode())
    return path


@pytest.fixture
def data_dir(tmp_path) -> Path:
    rows = ["index\tpremise\thypothesis\tgold_label\tnum"]
    labels = ["entailment", "neutral", "contradiction"]
    for i in range(1600):
        rows.append(f'{i}\tThe "quoted" man {i} sat.\tA man sat.\t{labels[i % 3]}\t5')
    _write(tmp_path / "mnli/dev_matched.tsv", "\n".join(rows) + "\n")
    hans = "\n".join(
        f'{{"sentence1": "the doctor saw the cat {i}", "sentence2": "the cat saw the doctor", '
        f'"gold_label": "{"entailment" if i % 2 else "non-entailment"}", '
        f'"heuristic": "{["lexical_overlap", "subsequence", "constituent"][i % 3]}"}}'
        for i in range(60)
    )
    _write(tmp_path / "hans/hans_eval.jsonl", hans + "\n")
    _write(tmp_path / "paws/wiki_test.tsv", "1\ta b\tb a\t1\n2\tc d\td c\t0\n", newline="\r\n")
    _write(tmp_path / "paws/qqp_dev_and_test.tsv", "id\tsentence1\tsentence2\tlabel\n7\tb'is it'\tb\"it is\"\t1\n")
    return tmp_path


def test_mnli_dev_split_reads_quotes_and_splits_seeded(data_dir):
    task = TASKS.get("mnli").load(data_dir)
    assert (len(task.train), len(task.dev), len(task.test)) == (100, 500, 1000)
    assert any('"quoted"' in e.text_a for e in task.train)
    assert task.ood["hans"].collapse == (0, 1, 1)
    assert {e.group for e in task.ood["hans"].examples} == {"lexical_overlap", "subsequence", "constituent"}
    again = TASKS.get("mnli").load(data_dir)
    assert [e.uid for e in again.test] == [e.uid for e in task.test]
    assert "mnli/dev_matched.tsv" in task.checksums()


def test_mnli_hardness_flags_become_groups_by_row(data_dir):
    rows = ["idx,pairID,hardness"] + [f"{i},{i}x,{1 if i % 4 == 0 else 0}" for i in range(1600)]
    _write(data_dir / "mnli/dev_matched_hardness.csv", "\n".join(rows) + "\n")
    task = TASKS.get("mnli").load(data_dir)
    for e in task.train + task.test:
        assert e.group == ("hard" if int(e.uid.rsplit("-", 1)[1]) % 4 == 0 else "easy")
    assert "mnli/dev_matched_hardness.csv" in task.id_checksums()
    _write(data_dir / "mnli/dev_matched_hardness.csv", "idx,pairID,hard\n0,a,1\n")
    with pytest.raises(BenchError, match="expected columns idx, pairID, hardness"):
        TASKS.get("mnli").load(data_dir)


def test_paws_quirks_crlf_headerless_and_bytes_literals(data_dir):
    from bench.data.tasks.glue import load_paws

    wiki = load_paws(data_dir, "wiki")
    assert [(e.text_a, e.label) for e in wiki.examples] == [("a b", 1), ("c d", 0)]
    qqp = load_paws(data_dir, "qqp")
    assert (qqp.examples[0].text_a, qqp.examples[0].text_b) == ("is it", "it is")


def test_missing_column_and_unknown_label_are_named(tmp_path):
    p = _write(tmp_path / "x.tsv", "premise\tgold_label\na\tentailment\n")
    with pytest.raises(BenchError, match="missing column hypothesis"):
        to_examples(read_rows(p), p, ("premise",), ("hypothesis",), ("gold_label",), {"entailment": 0})
    p = _write(tmp_path / "y.tsv", "premise\thypothesis\tgold_label\na\tb\tmaybe\n")
    with pytest.raises(BenchError, match="unknown label 'maybe'"):
        to_examples(read_rows(p), p, ("premise",), ("hypothesis",), ("gold_label",), {"entailment": 0})


def test_missing_directory_and_file_are_errors(tmp_path):
    with pytest.raises(BenchError, match="does not exist"):
        find_file(tmp_path / "nope", ["a.tsv"], "X")
    with pytest.raises(BenchError, match="none of a.tsv"):
        find_file(tmp_path, ["a.tsv"], "X")
    with pytest.raises(BenchError, match="--data-dir"):
        TASKS.get("mnli").load(None)


def test_checksum_mismatch_against_sha256sums_is_an_error(data_dir):
    (data_dir / "SHA256SUMS").write_text("0" * 64 + "  mnli/dev_matched.tsv\n")
    with pytest.raises(BenchError, match="checksum does not match"):
        TASKS.get("mnli").load(data_dir)


def test_hub_only_task_offline_fails_at_once_naming_the_files(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BenchError, match="QQP train: none of qqp/train.tsv.*provide it offline with --data-dir"):
        TASKS.get("qqp").load(tmp_path)


def test_qqp_and_fever_official_local_formats(data_dir):
    qqp = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n" + "".join(
        f"{i}\t1\t2\thow do I {i}?\twhat is {i}?\t{i % 2}\n" for i in range(60))
    _write(data_dir / "qqp/train.tsv", qqp)
    _write(data_dir / "qqp/dev.tsv", qqp)
    task = TASKS.get("qqp").load(data_dir)
    assert task.id_metric == "f1_weighted" and set(task.ood) == {"paws_qqp", "paws_wiki"}
    assert {o.pool for o in task.ood.values()} == {"paws"} and len(task.dev) == 3

    labels = ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
    fever = "".join(f'{{"claim": "c {i}", "evidence": "e {i}", "gold_label": "{labels[i % 3]}"}}\n' for i in range(60))
    _write(data_dir / "fever/fever.train.jsonl", fever)
    _write(data_dir / "fever/fever.dev.jsonl", fever)
    _write(data_dir / "fever_symmetric/v1_generated.jsonl", '{"id": 1, "label": "SUPPORTS", "claim": "c", "evidence_sentence": "e"}\n')
    _write(data_dir / "fever_symmetric/v2_test.jsonl", '{"id": 2, "claim": "c", "evidence": "e", "sentence1": "e", '
           '"sentence2": "c", "gold_label": "REFUTES", "label": "REFUTES"}\n')
    task = TASKS.get("fever").load(data_dir)
    assert task.bias_features == "claim" and task.train[0].text_b.startswith("c ")
    assert [o.examples[0].label for o in task.ood.values()] == [0, 1]


def test_present_but_corrupt_local_file_never_falls_back_to_the_hub(data_dir, monkeypatch):
    import bench.data.hub

    monkeypatch.setattr(bench.data.hub, "load_hub_split", lambda *a: pytest.fail("fell back to the hub"))
    _write(data_dir / "qqp/train.tsv", "id\tquestion1\tquestion2\tis_duplicate\n1\ta\tb\tmaybe\n")
    _write(data_dir / "qqp/dev.tsv", "id\tquestion1\tquestion2\tis_duplicate\n1\ta\tb\t1\n")
    with pytest.raises(BenchError, match="unknown label 'maybe'"):
        TASKS.get("qqp").load(data_dir)


def test_qqp_s_ood_information_is_both_paws_training_sets(tmp_path):
    """SRNet section 4.5: "PAWS train" for QQP is PAWS-QQP's and PAWS-Wiki's training sets."""
    from bench.data.tasks.glue import paws_train_loader

    rows = lambda n, tag: "id\tsentence1\tsentence2\tlabel\n" + "".join(  # noqa: E731
        f"{tag}{i}\ta {i}\tb {i}\t{i % 2}\n" for i in range(n))
    (tmp_path / "paws").mkdir()
    (tmp_path / "paws" / "qqp_train.tsv").write_text(rows(3, "q"))
    with pytest.raises(BenchError, match="PAWS-wiki training set"):
        paws_train_loader(tmp_path)()
    (tmp_path / "paws" / "wiki_train.tsv").write_text(rows(5, "w"))
    examples, source = paws_train_loader(tmp_path)()
    assert len(examples) == 8 and len(source.sha256) == 2


def test_a_run_reads_the_data_folder_when_no_data_dir_is_given(tmp_path, monkeypatch):
    """docs/data.md: --data-dir, else $BENCH_DATA, else the per-user data folder, when it exists."""
    from bench.data.places import data_home
    from bench.spec.run import resolve

    monkeypatch.setenv("BENCH_DATA", str(tmp_path / "data"))
    assert resolve("finetune", "ood", check_backbone=False).data_dir is None  # not there: not used
    (tmp_path / "data").mkdir()
    assert resolve("finetune", "ood", check_backbone=False).data_dir == str(tmp_path / "data")
    assert resolve("finetune", "ood", check_backbone=False, data_dir=str(tmp_path)).data_dir == str(tmp_path)
    monkeypatch.delenv("BENCH_DATA")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert data_home() == tmp_path / "xdg" / "robust-compression-bench" / "data"
