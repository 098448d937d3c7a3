import numpy as np

from bench.core.runner import torch_device
from bench.model.predict import predict_logits


def test_poe_and_ce_train_different_models_from_the_same_start(runner, run_spec):
    ce = runner.candidate(run_spec("finetune"))
    poe = runner.candidate(run_spec("finetune", params={"loss": "poe", "epochs": 2, "batch_size": 8}))
    task = runner.task_data(run_spec())
    a = predict_logits(ce.model, ce.tokenizer, task.test, 64, torch_device(run_spec()))
    b = predict_logits(poe.model, poe.tokenizer, task.test, 64, torch_device(run_spec()))
    assert not np.allclose(a, b)
    assert poe.info["bias_model"].startswith("5 lexical-overlap")


def test_training_is_deterministic_on_cpu(tmp_path, run_spec):
    from bench.core.runner import Runner

    r1 = Runner(tmp_path / "a", progress=False, log=lambda m: None).run(run_spec("finetune"))
    r2 = Runner(tmp_path / "b", progress=False, log=lambda m: None).run(run_spec("finetune"))
    scores = lambda r: {k: v for k, v in r.metrics.items() if not k.startswith("eff/")}  # noqa: E731  (timings vary)
    assert scores(r1) == scores(r2)
    assert r1.method_info["history"] == r2.method_info["history"]


def test_confreg_teacher_is_the_f_bias_reference_model(runner, run_spec):
    rec = runner.run(run_spec("finetune", params={"loss": "confreg", "epochs": 2, "batch_size": 8}))
    ref = runner.run(run_spec("finetune"))
    assert rec.method_info["teacher"] == ref.artifact["key"]
    assert rec.reference == ref.run_id
