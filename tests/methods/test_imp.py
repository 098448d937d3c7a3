import pytest
import torch

from bench.model import losses
from methods.kit import prune_schedule


@pytest.mark.parametrize("s, n", [(0.5, 5), (0.9, 9), (0.85, 9), (0.1, 1), (0.0, 0)])
def test_schedule_prunes_ten_percent_every_tenth_and_ends_at_target(s, n):
    sched = prune_schedule(s, 1000)
    assert len(sched) == n
    if n:
        steps, targets = zip(*sched, strict=True)
        assert list(steps) == [100 * (k + 1) - 1 for k in range(n)]
        assert targets[-1] == pytest.approx(s)
        assert all(b > a for a, b in zip(targets, targets[1:], strict=False))
        assert all(t <= s + 1e-9 for t in targets)


@pytest.mark.parametrize("s, total", [(0.5, 1), (0.1, 5), (0.2, 2), (0.9, 3)])
def test_schedule_on_short_runs_never_points_before_the_first_step(s, total):
    sched = prune_schedule(s, total)
    assert all(0 <= step < total for step, _ in sched)
    assert sched[-1][1] == pytest.approx(s)


def test_imp_really_trains_with_the_debiasing_loss(runner, run_spec, monkeypatch):
    """DESIGN section 7: SRNet's IMP trainer never passed the debiasing loss."""
    calls = []
    real = losses.poe
    monkeypatch.setattr(losses, "poe", lambda *a: calls.append(1) or real(*a))
    rec = runner.run(run_spec("imp", sparsity=0.4, params={"loss": "poe", "epochs": 2, "batch_size": 8}))
    assert len(calls) == rec.method_info["train_steps"]
    assert rec.label == "imp (poe)" and "bias_acc/train_oof" in rec.method_info


def test_best_checkpoint_is_chosen_only_at_target_sparsity(runner, run_spec):
    rec = runner.run(run_spec("imp", sparsity=0.7, params={"epochs": 4, "batch_size": 8}))
    info = rec.method_info
    assert info["best_step"] > max(info["prune_steps"])
    assert rec.sparsity["sparsity"] == pytest.approx(0.7, abs=1e-3)


def test_rewind_retrains_the_same_mask_from_pretrained_weights(runner, run_spec, tiny_bert, monkeypatch):
    import methods.imp as imp
    from bench.model.backbone import load_classifier, resolve
    from bench.model.masking import prunable_linears

    at_start: dict[str, torch.Tensor] = {}
    real_train = imp.train

    def spy(model, *a, **kw):
        if kw.get("desc", "").startswith("imp-rewind"):
            at_start.update({k: v.detach().clone() for k, v in model.state_dict().items()})
            at_start.update({f"{n}.weight": lin.weight.detach().clone() for n, lin in prunable_linears(model).items()})
        return real_train(model, *a, **kw)

    monkeypatch.setattr(imp, "train", spy)
    found = runner.candidate(run_spec("imp", sparsity=0.5))
    ticket = runner.candidate(run_spec("imp", sparsity=0.5, params={"rewind": True, "epochs": 2, "batch_size": 8}))
    assert ticket.info["mask_from"] == found.lineage["key"]
    assert found.masks.keys() == ticket.masks.keys()
    for name in found.masks:
        assert torch.equal(found.masks[name], ticket.masks[name])
    pre = load_classifier(resolve(str(tiny_bert)), 3, seed=0).state_dict()  # the pre-trained weights, not IMP's
    for name, w in pre.items():
        mask = found.masks.get(name.removesuffix(".weight")) if name.endswith("weight") else None
        assert torch.equal(at_start[name], w * mask if mask is not None else w), name
    w_found = dict(found.model.named_parameters())["bert.encoder.layer.0.attention.self.query.weight"]
    w_ticket = dict(ticket.model.named_parameters())["bert.encoder.layer.0.attention.self.query.weight"]
    assert not torch.equal(w_found, w_ticket)
    assert torch.equal(w_ticket == 0, w_found == 0)
