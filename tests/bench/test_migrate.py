"""``bench migrate``: schema-1 records read as schema 2, with what the old format left to the
leaderboard written into them by the old leaderboard's rule, and nothing else changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import main
from bench.errors import BenchError
from bench.store.records import load_record, load_records


def _v1(run_id, label, target, suite, seed=0, params=None, info=None, reference=None, max_examples=None):
    return {"schema_version": 1, "run_id": run_id, "method": label.split()[0], "label": label,
            "params": {"loss": "ce", "epochs": 3.0, **(params or {})}, "task": "sst2", "backbone": "minilm", "seed": seed,
            "suite": suite, "sparsity": {"target": target}, "metrics": {"id": 0.9}, "details": {},
            "method_info": info or {}, "predictions": f"../predictions/{run_id}.jsonl.gz", "predictions_sha256": "ab" * 32,
            "reference": reference, "artifact": {"key": f"art-{run_id}"},
            "provenance": {"config": {"params": params or {}, "max_examples": max_examples, "suite_params": {}},
                           "versions": {}, "git": {}, "data": {}, "device": {}}}


def _folder(tmp_path: Path, records: list[dict]) -> Path:
    (tmp_path / "records").mkdir(parents=True)
    for d in records:
        (tmp_path / "records" / f"{d['run_id']}.json").write_text(json.dumps(d))
    return tmp_path


def test_schema_1_records_are_refused_in_one_line_then_migrated_once(tmp_path, capsys):
    out = _folder(tmp_path, [
        _v1("ft", "finetune (ce)", None, "adversarial", info={"best_step": 3, "train_steps": 5}),
        _v1("ft-long", "finetune (ce)", None, "adversarial", params={"epochs": 9.0}),
        _v1("rt", "robust ticket (retrained, ce)", 0.5, "adversarial", params={"ticket": "random", "loss": "poe", "mask_lr": 0.1},
            info={"best_step": 1, "retrain_steps": 4, "search_best_step": 2, "search_steps": 6}),
        _v1("ft-ood", "finetune (ce)", None, "ood", reference="ft-ood"),
        _v1("imp-ood", "imp (ce)", 0.5, "ood", reference="ft-ood", info={"search_steps": 7}),
        _v1("other-seed", "imp (ce)", 0.5, "adversarial", seed=1),
    ])
    with pytest.raises(BenchError, match=r"schema 1; rewrite its folder with: python -m bench migrate"):
        load_record(out / "records" / "ft.json")
    before = {p.name: json.loads(p.read_text()) for p in (out / "records").glob("*.json")}

    assert main(["migrate", str(out)]) == 0
    assert "6 records rewritten, 0 already current" in capsys.readouterr().out
    recs = {r.run_id: r for r in load_records(out / "records")}
    rt = recs["rt"]
    assert rt.variant == ["mask_lr=0.1"]  # ticket and loss were shown in the label by the schema-1 rule
    assert "params" not in rt.provenance["config"] and rt.params == before["rt.json"]["params"]  # stored once, in full
    assert rt.method_info["kept"] == [["training", 1, 4], ["ticket search", 2, 6]]  # in the columns' old order
    assert recs["ft"].method_info["kept"] == [["training", 3, 5]] and "kept" not in recs["imp-ood"].method_info
    # an attack record: the plainest dense finetune (ce) of its seed and suite; an OOD record: its F_bias reference's
    assert rt.baseline == recs["ft-long"].baseline == recs["ft"].baseline == "art-ft"
    assert recs["imp-ood"].baseline == recs["ft-ood"].baseline == "art-ft-ood"
    assert recs["other-seed"].baseline is None  # no finetune (ce) of seed 1: none, not another seed's
    assert rt.provenance["migrated"]["from_schema"] == 1
    for name, d in before.items():  # the run itself is untouched
        after = json.loads((out / "records" / name).read_text())
        assert {k: after[k] for k in ("run_id", "metrics", "predictions", "predictions_sha256", "params")} == \
               {k: d[k] for k in ("run_id", "metrics", "predictions", "predictions_sha256", "params")}

    assert main(["migrate", str(out)]) == 0
    assert "0 records rewritten, 6 already current" in capsys.readouterr().out


def test_a_tie_for_the_attack_baseline_gives_none(tmp_path):
    out = _folder(tmp_path, [_v1("a", "finetune (ce)", None, "adversarial", params={"lr": 1e-5}),
                             _v1("b", "finetune (ce)", None, "adversarial", params={"warmup_ratio": 0.0}),
                             _v1("c", "imp (ce)", 0.5, "adversarial")])
    assert main(["migrate", str(out)]) == 0
    assert load_record(out / "records" / "c.json").baseline is None


def test_an_unknown_schema_or_a_broken_file_stops_it_before_anything_is_written(tmp_path, capsys):
    out = _folder(tmp_path, [_v1("a", "finetune (ce)", None, "ood"), {**_v1("z", "imp (ce)", 0.5, "ood"), "schema_version": 7}])
    before = (out / "records" / "a.json").read_text()
    assert main(["migrate", str(out)]) == 2
    err = capsys.readouterr().err
    assert "record schema 7 is unknown" in err and "nothing was rewritten" in err and len(err.strip().splitlines()) == 1
    (out / "records" / "z.json").write_text("{not json")
    assert main(["migrate", str(out)]) == 2
    assert "not a readable run record" in capsys.readouterr().err
    assert (out / "records" / "a.json").read_text() == before


def test_schema_3_gains_flips_and_keeps_its_own_column_declarations(tmp_path, capsys):
    """Schema 3 to 4 adds flips and KL from the rows; a declaration the record already had (here
    which column ranks) stands, so a migration never re-ranks a committed table."""
    import shutil

    root = Path(__file__).resolve().parents[2] / "results" / "quickstart"
    out = tmp_path / "q"
    shutil.copytree(root / "records", out / "records")
    shutil.copytree(root / "predictions", out / "predictions")
    path = next(p for p in sorted((out / "records").glob("*.json")) if "flips/test" in json.loads(p.read_text())["metrics"])
    d = json.loads(path.read_text())
    d["schema_version"] = 3
    d["metrics"] = {k: v for k, v in d["metrics"].items() if not k.startswith(("flips", "kl/"))}
    d["columns"] = [c | {"primary": not c["primary"]} for c in d["columns"] if not c["key"].startswith(("flips", "kl/"))]
    path.write_text(json.dumps(d))
    assert main(["migrate", str(out)]) == 0
    after = json.loads(path.read_text())
    assert after["schema_version"] == 4 and {"flips/test", "kl/test"} <= set(after["metrics"])
    kept = {c["key"]: c for c in after["columns"]}
    from bench.store.records import Column

    assert all(kept[c["key"]] == Column.from_dict(c).to_dict() for c in d["columns"])  # its own declarations stand
    assert kept["kl/test"]["kind"] == "divergence"
    first = (d["provenance"].get("migrated") or {"from_schema": 3})["from_schema"]
    assert after["provenance"]["migrated"]["from_schema"] == first  # where it began, kept
