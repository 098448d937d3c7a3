import pytest
import torch

from bench.model import losses
from methods.kit import prune_schedule


@pytest.mark.parametrize("s, n", [(0.5, 5), (0.9, 9), (0.85, 9), (0.1, 1), (0.0, 0)])
def test_schedule_prunes_ten_percent_at_zero_and_every_tenth_and_ends_at_target(s, n):
    """SRNet algorithm 1 (appendix A.1.1): Delta_s = 10 %, Delta_t = 0.1 t_max, the first prune at t = 0."""
    sched = prune_schedule(s, 1000)
    assert len(sched) == n
    if n:
        steps, targets = zip(*sched, strict=True)
        assert list(steps) == [100 * k for k in range(n)]
        assert targets[-1] == pytest.approx(s)
        assert all(b > a for a, b in zip(targets, targets[1:], strict=False))
        assert all(t <= s + 1e-9 for t in targets)


@pytest.mark.parametrize("s, total", [(0.5, 1), (0.1, 5), (0.2, 2), (0.9, 3)])
def test_schedule_on_short_runs_stays_inside_the_run(s, total):
    sched = prune_schedule(s, total)
    assert all(0 <= step < total for step, _ in sched)
    assert dict(sched)[max(dict(sched))] == pytest.approx(s)  # the last prune, the target, wins a shared step


def test_imp_starts_from_the_fine_tuned_model_and_prunes_on_schedule(runner, run_spec, monkeypatch):
    """Algorithm 1: theta_0 = theta_ft; after the k-th prune (step (k - 1) Delta_t) exactly k x 10 %
    of every prunable matrix is zero; the subnetwork returned is the one at n Delta_t."""
    import methods.imp as imp
    from bench.model.masking import prunable_linears

    recipe = {"epochs": 5, "batch_size": 8}  # 40 examples: 25 steps, Delta_t = 2.5
    start = runner.candidate(run_spec("finetune", params=recipe))
    seen: dict[int, list[float]] = {}
    real = imp.apply_masks

    def spy(model, masks):
        real(model, masks)
        seen[len(seen)] = [float((lin.weight == 0).float().mean()) for lin in prunable_linears(model).values()]
    monkeypatch.setattr(imp, "apply_masks", spy)
    first_weights = {}
    real_train = imp.train

    def train_spy(model, *a, **kw):
        first_weights.update({k: v.detach().clone() for k, v in model.state_dict().items() if "classifier" not in k})
        first_weights["restart"] = kw["restart"]
        return real_train(model, *a, **kw)
    monkeypatch.setattr(imp, "train", train_spy)
    cand = runner.candidate(run_spec("imp", sparsity=0.3, params=recipe))
    start_weights = {k: v for k, v in start.model.state_dict().items() if "classifier" not in k}
    assert all(torch.equal(first_weights[k], v) for k, v in start_weights.items())  # the fine-tuned weights
    assert first_weights["restart"] == {0, 2, 5}  # the optimizer starts afresh at every prune
    assert cand.info["prune_steps"] == [0, 2, 5] and cand.info["returned_at"] == 8  # round(k * 2.5), round(3 * 2.5)
    for k, fractions in seen.items():
        assert all(f == pytest.approx(0.1 * (k + 1), abs=1e-3) for f in fractions), (k, fractions)
    assert cand.info["start_model"] == start.lineage["key"] and cand.info["best_step"] == 8


def test_imp_really_trains_with_the_debiasing_loss(runner, run_spec, monkeypatch):
    """docs/design.md section 7: SRNet's IMP trainer never passed the debiasing loss."""
    calls = []
    real = losses.poe
    monkeypatch.setattr(losses, "poe", lambda *a: calls.append(1) or real(*a))
    rec = runner.run(run_spec("imp", sparsity=0.4, params={"loss": "poe", "epochs": 2, "batch_size": 8}))
    assert len(calls) == rec.method_info["train_steps"]
    assert rec.label == "imp (poe)" and "bias_acc/train_oof" in rec.method_info


def test_rewind_searches_from_pretrained_weights_with_its_own_loss_and_retrains_from_them(runner, run_spec, tiny_bert,
                                                                                         monkeypatch):
    """SRNet eq. 3: m = M(P^{imp-rw}_{L2}(f(theta_pt))), then A_{L1}(f(m . theta_pt)); the weights go
    back to theta_pt after every prune, and retraining starts from theta_pt under the mask."""
    import methods.imp as imp
    from bench.model.backbone import load_classifier, resolve

    starts: list[dict] = []
    real_train = imp.train

    def spy(model, tok, ctx, p, loss_fn, **kw):
        starts.append({"desc": kw.get("desc", ""), "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
                       "weights": {n: q.detach().clone() for n, q in model.named_parameters()}})
        return real_train(model, tok, ctx, p, loss_fn, **kw)

    rewinds = []
    real_rewind = imp.rewind_weights
    monkeypatch.setattr(imp, "rewind_weights", lambda m, pre: rewinds.append(1) or real_rewind(m, pre))
    monkeypatch.setattr(imp, "train", spy)
    poe = []
    real_poe = losses.poe
    monkeypatch.setattr(losses, "poe", lambda *a: poe.append(1) or real_poe(*a))
    ticket = runner.candidate(run_spec("imp", sparsity=0.3, params={"rewind": True, "prune_loss": "poe", "epochs": 5,
                                                                  "batch_size": 8}))
    search, retrain = starts
    assert search["desc"].startswith("imp-rewind search") and retrain["desc"].startswith("imp-rewind 0.30 ce")
    assert len(poe) == ticket.info["search_steps"] == 5  # PoE while searching (L_2), CE while retraining (L_1)
    assert len(rewinds) == 2  # after the prunes at steps 0 and 2; the third (step 5) ends the search
    pre = load_classifier(resolve(str(tiny_bert)), 3, seed=0).state_dict()
    assert all(torch.equal(search["state"][k], v) for k, v in pre.items())  # searched from pre-trained weights
    for name, mask in ticket.masks.items():  # retrained from pre-trained values under the mask
        w = retrain["weights"][f"{name}.parametrizations.weight.original"]
        assert torch.equal(w, pre[f"{name}.weight"]) and float((~mask).float().mean()) == pytest.approx(0.3, abs=1e-3)
    assert ticket.sparsity.sparsity == pytest.approx(0.3, abs=1e-3)
