"""A record's metrics are assembled by one function (``bench.core.assemble``) that a run,
``bench rescore`` and ``bench migrate`` all call, so the three cannot drift apart."""

import json

import bench.core.assemble as assembling
import bench.core.rescore as rescoring
import bench.core.runner as running
import bench.core.upgrade as upgrading
from bench.core.rescore import rescore
from bench.core.upgrade import migrate
from bench.store.records import read_records

FROM_ROWS = ("ece/", "loyalty/", "loyalty_prob/")  # what a schema-2 record lacked


def test_a_run_rescore_and_migrate_assemble_a_records_metrics_alike(runner, run_spec, monkeypatch):
    """A pruned run (its baseline's loyalty, F_bias against the dense reference) re-scores every
    metric but the timings, and its rows-made metrics taken away, migrates back to the same
    metrics and columns; each path went through ``assemble``."""
    calls = []
    for module in (running, rescoring, upgrading):
        monkeypatch.setattr(module, "assemble", lambda *a, _by=module.__name__, **kw:
                            calls.append(_by) or assembling.assemble(*a, **kw))
    runner.run(run_spec("imp", sparsity=0.5, params={"epochs": 1, "batch_size": 8}))
    made = {r.run_id: r for r in read_records(runner.out / "records")[0]}
    assert len(made) == 2 and any("loyalty/test" in r.metrics and "f_bias/hans" in r.metrics for r in made.values())
    for res in rescore(runner.out):  # every metric a run assembled, recomputed: loyalty and F_bias too
        assert res.status == "exact" and res.checked == len([k for k in made[res.run_id].metrics if not k.startswith("eff/")])
    for p in (runner.out / "records").glob("*.json"):  # as schema 2 kept it
        d = json.loads(p.read_text())
        d["metrics"] = {k: v for k, v in d["metrics"].items() if not k.startswith(FROM_ROWS)}
        d["columns"] = [c for c in d["columns"] if not c["key"].startswith(FROM_ROWS)]
        d["details"].pop("collapse")
        p.write_text(json.dumps(d | {"schema_version": 2}))
    assert migrate(runner.out, "test") == (2, 0)
    for rec in read_records(runner.out / "records")[0]:
        assert rec.metrics == made[rec.run_id].metrics and rec.columns == made[rec.run_id].columns
    assert set(calls) == {"bench.core.runner", "bench.core.rescore", "bench.core.upgrade"}
