"""Nothing trains that the user did not ask for (issue 103): a checkpoint judged as it is pulls
no fine-tuned F_bias reference; ``--reference`` names one (a checkpoint folder, evaluated as a
job, or a record); ``bench run --dry-run`` is a one-group ``sweep --dry-run``; a build the run
does not name is said, with its estimate, before the first job starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench.cli import main
from bench.core.estimate import unnamed_builds
from bench.core.runner import Runner
from bench.registry import SUITES
from bench.spec.plan import plan
from bench.spec.requires import trains_itself
from bench.spec.run import resolve
from bench.spec.sweep import Throughput, load_spec, runs
from bench.store.records import SCHEMA_VERSION, load_records

ROOT = Path(__file__).resolve().parents[2]
NLI = ["entailment", "neutral", "contradiction"]


def _checkpoint(backbone: Path, out: Path, seed: int) -> Path:
    """A "fine-tuned elsewhere" classifier of the task's labels: the tiny backbone, a seeded head."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(
        backbone, num_labels=3, id2label=dict(enumerate(NLI)), label2id={n: i for i, n in enumerate(NLI)})
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(backbone).save_pretrained(out)
    return out


@pytest.fixture
def ckpts(tiny_bert, tmp_path) -> tuple[Path, Path]:
    return _checkpoint(tiny_bert, tmp_path / "mine", 1), _checkpoint(tiny_bert, tmp_path / "full", 2)


def _eval_file(tmp_path: Path) -> Path:
    rows = [{"premise": f"the cat {i} sat", "hypothesis": "the cat sat" if i % 2 else "a dog ran", "label": NLI[i % 3]}
            for i in range(12)]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_checkpoint_judged_as_it_is_plans_no_training(ckpts, tiny_bert, tmp_path):
    mine, full = ckpts
    spec = resolve("checkpoint", "ood", backbone=str(mine), max_examples=40, suite_params={"eval_file": str(_eval_file(tmp_path))})
    jobs = plan([spec])
    assert [(j.kind, j.spec.method) for j in jobs.values()] == [("build", "checkpoint"), ("evaluate", "checkpoint")]
    assert not any(trains_itself(j.spec) for j in jobs.values() if j.kind == "build")
    # what costs nothing to build pulls no trained reference either: a checkpoint quantized as it is
    quantized = resolve("quantize", "ood", backbone=str(mine), max_examples=40, params={"start": "checkpoint"})
    assert {j.spec.method for j in plan([quantized]).values()} == {"checkpoint", "quantize"}
    # a method that trains keeps its reference: the recipe's fine-tuned model
    imp = resolve("imp", "ood", backbone=str(tiny_bert), max_examples=40, sparsity=0.5)
    assert ("build", "finetune") in {(j.kind, j.spec.method) for j in plan([imp]).values()}
    # --reference DIR: exactly one more evaluation, of that checkpoint as it is; nothing trains
    named = resolve("checkpoint", "ood", backbone=str(mine), max_examples=40, reference=str(full),
                    suite_params={"eval_file": str(_eval_file(tmp_path))})
    more = plan([named])
    evaluations = [j.spec for j in more.values() if j.kind == "evaluate"]
    assert len(evaluations) == 2 and {e.backbone for e in evaluations} == {str(mine), str(full)}
    assert {j.spec.method for j in more.values()} == {"checkpoint"}
    assert not any(trains_itself(j.spec) for j in more.values() if j.kind == "build")
    # a sweep group's `reference` is the same field: the same plan
    toml = tmp_path / "mine.toml"
    toml.write_text(f'[[group]]\nmethod = "checkpoint"\nsuite = "ood"\nbackbone = "{mine}"\nmax_examples = 40\n'
                    f'reference = "{full}"\nsuite_params = {{ eval_file = "{_eval_file(tmp_path)}" }}\n')
    assert plan(runs(load_spec(toml))).keys() == more.keys()


def test_reference_dir_or_record_gives_f_bias_without_training(ckpts, tmp_path, capsys):
    mine, full = ckpts
    out = tmp_path / "out"
    base = ["run", "--method", "checkpoint", "--suite", "ood", "--backbone", str(mine), "--max-examples", "40", "--quiet"]
    assert main([*base, "--reference", str(full), "--out", str(out)]) == 0
    records = {r.backbone: r for r in load_records(out / "records")}
    assert set(records) == {str(mine), str(full)}  # the candidate, and the named reference judged as it is
    cand, ref = records[str(mine)], records[str(full)]
    assert cand.reference == ref.run_id and ref.reference is None
    expected = SUITES.get("ood").compare(cand.metrics, ref.metrics)
    assert expected and {k: cand.metrics[k] for k in expected} == pytest.approx(expected)
    assert {p.name.split("-")[0] for p in (out / "artifacts").iterdir()} == {"checkpoint"}  # nothing trained
    # the record of that evaluation names the same reference: the same F_bias, and nothing else runs
    other = tmp_path / "other"
    record_file = out / "records" / f"{ref.run_id}.json"
    assert main([*base, "--reference", str(record_file), "--out", str(other)]) == 0
    (again,) = load_records(other / "records")
    assert again.reference == ref.run_id and again.run_id == cand.run_id
    assert {k: again.metrics[k] for k in expected} == pytest.approx(expected)
    assert {p.name.split("-")[0] for p in (other / "artifacts").iterdir()} == {"checkpoint"}  # the reference not built
    capsys.readouterr()


def test_a_bad_reference_is_one_line_before_anything_runs(ckpts, tmp_path, capsys):
    mine, _ = ckpts
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"run_id": "x", ')
    not_a_record = tmp_path / "other.json"
    not_a_record.write_text('{"run_id": "x"}')
    sst2 = next(p for p in sorted(ROOT.glob("results/*/records/*.json")) if json.loads(p.read_text())["task"] != "nli_synth")
    out = tmp_path / "out"
    base = ["run", "--method", "checkpoint", "--suite", "ood", "--backbone", str(mine), "--out", str(out)]
    for reference, says in ((tmp_path / "missing", "no such checkpoint folder or record file"),
                            (corrupt, "not a readable run record"), (not_a_record, f"is not {SCHEMA_VERSION}"),
                            (sst2, "a record of task")):
        assert main([*base, "--reference", str(reference)]) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and len(err.splitlines()) == 1 and err.startswith("bench: error:"), err
    assert main([*base, "--suite", "adversarial", "--reference", str(mine)]) == 2  # compares nothing
    assert "compares nothing" in capsys.readouterr().err
    assert not out.exists()


def test_run_dry_run_is_a_one_group_sweep_dry_run_and_says_what_it_builds_unasked(tiny_bert, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["--backbone", str(tiny_bert), "--max-examples", "40", "--sparsity", "0.5"]
    assert main(["run", "--method", "imp", "--suite", "ood", *args, "--dry-run", "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    assert not out.exists()  # nothing built, nothing written
    lines = shown.splitlines()
    assert lines[0].startswith("4 jobs, 4 to run") and sum(line.strip()[:1].isdigit() for line in lines[1:]) == 4
    (said,) = [line for line in lines if line.startswith("builds ")]
    assert said.startswith("builds finetune") and "F_bias reference" in said and "about" in said
    spec = tmp_path / "one.toml"
    spec.write_text(f'[[group]]\nmethod = "imp"\nsuite = "ood"\nbackbone = "{tiny_bert}"\nmax_examples = 40\nsparsity = 0.5\n')
    assert main(["sweep", str(spec), "--dry-run", "--out", str(out)]) == 0
    assert capsys.readouterr().out == shown  # one code path
    # a run that names the fine-tuned model itself is not told it builds it
    assert main(["run", "--method", "imp", "finetune", "--suite", "ood", *args[:4], "--dry-run", "--out", str(out)]) == 0
    assert "builds " not in capsys.readouterr().out


def test_an_unnamed_build_is_said_before_the_first_job_starts(tiny_bert, tmp_path, capsys, monkeypatch):
    from bench.core import batch

    started = []
    monkeypatch.setattr(batch, "run_jobs", lambda *a, **k: started.append(capsys.readouterr().err) or [])
    run = resolve("finetune", "ood", backbone=str(tiny_bert), max_examples=40, params={"loss": "poe"})
    batch.run_batch([run], tmp_path / "out", quiet=True)
    (before,) = started
    (said,) = [line for line in before.splitlines() if " builds " in line]
    assert "builds finetune" in said and "(F_bias reference, baseline)" in said and "assumed 10 training" in said
    # the same line the plan gives, and none for a checkpoint judged as it is
    jobs = plan([run])
    runner = Runner(tmp_path / "out", progress=False, log=lambda m: None)
    assert unnamed_builds(jobs, jobs, [run], runner, Throughput()) == [said.split(": ", 1)[1]]
