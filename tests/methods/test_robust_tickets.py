"""Robust Tickets (Zheng et al. 2022) and FreeLB on the tiny BERT."""

import math

import pytest
import torch

from bench.model.backbone import resolve
from bench.model.masking import HardConcreteMask, draw_ticket, l0_penalty
from bench.train.freelb import ascend, init_delta
from methods.robust_tickets import RobustTickets, RobustTicketsParams, random_like

P = {"epochs": 2, "batch_size": 8, "search_epochs": 2, "retrain_epochs": 1, "mask_lr": 0.5}


def _z(log_alpha: float, n: int = 200_000) -> torch.Tensor:
    torch.manual_seed(0)
    return HardConcreteMask(torch.full((n,), log_alpha)).sample()


@pytest.mark.parametrize("la", [-10.0, -1.0, 0.0, 2.0, 10.0])
def test_hard_concrete_lies_in_0_1_with_the_right_point_masses(la):
    z = _z(la)
    assert z.min() >= 0 and z.max() <= 1
    # P(z = 0) = P(s < -gamma / (zeta - gamma)) = sigmoid(beta * log(-gamma / zeta) - log_alpha), and symmetrically
    beta, gamma, zeta = HardConcreteMask.BETA, HardConcreteMask.GAMMA, HardConcreteMask.ZETA
    p0 = 1 / (1 + math.exp(-(beta * math.log(-gamma / zeta) - la)))
    p1 = 1 / (1 + math.exp(-(beta * math.log((zeta - 1) / (1 - gamma)) + la)))
    assert (z == 0).float().mean().item() == pytest.approx(p0, abs=0.005)
    assert (z == 1).float().mean().item() == pytest.approx(p1, abs=0.005)
    if la >= 10:
        assert (z == 1).float().mean() > 0.99
    if la <= -10:
        assert (z == 0).float().mean() > 0.99


def test_l0_penalty_equals_its_closed_form_and_the_sampled_rate():
    gates = [HardConcreteMask(torch.tensor([[-2.0, 0.0], [1.0, 3.0]])), HardConcreteMask(torch.tensor([0.5]))]
    beta, gamma, zeta = HardConcreteMask.BETA, HardConcreteMask.GAMMA, HardConcreteMask.ZETA
    la = torch.tensor([-2.0, 0.0, 1.0, 3.0, 0.5])
    assert l0_penalty(gates).item() == pytest.approx(torch.sigmoid(la - beta * math.log(-gamma / zeta)).mean().item())
    for value in (-2.0, 0.5, 3.0):
        g = HardConcreteMask(torch.tensor([value]))
        assert (_z(value) != 0).float().mean().item() == pytest.approx(g.p_nonzero().item(), abs=0.005)


@pytest.mark.parametrize("scope", ["global", "local"])
@pytest.mark.parametrize("s", [0.3, 0.7])
def test_the_drawn_ticket_has_exactly_the_target_sparsity(scope, s):
    torch.manual_seed(0)
    gates = [HardConcreteMask(torch.randn(33, 17)), HardConcreteMask(torch.randn(64, 8) + 1.0)]
    draw_ticket(gates, s, scope)
    if scope == "global":
        n = sum(g.ticket.numel() for g in gates)
        assert sum(int((~g.ticket).sum()) for g in gates) == round(s * n)
        assert int((~gates[0].ticket).sum()) != round(s * gates[0].ticket.numel())  # layers differ
    else:
        assert all(int((~g.ticket).sum()) == round(s * g.ticket.numel()) for g in gates)
    g = gates[0]
    kept, dropped = g.log_alpha[g.ticket], g.log_alpha[~g.ticket]
    assert kept.min() >= dropped.max()  # the largest sigmoid(log_alpha) are kept
    g.eval()
    assert torch.equal(g(torch.ones(33, 17)), g.ticket.float())  # binary wherever evaluated


def test_freelb_perturbations_respect_their_norm_bound():
    torch.manual_seed(0)
    embeds, attention = torch.randn(4, 7, 16), torch.ones(4, 7, dtype=torch.long)
    attention[0, 5:] = 0
    torch.manual_seed(0)
    delta = init_delta(embeds, attention, 0.05)
    # FreeLB's reference init (zhuchen03/FreeLB, run_glue_freelb.py, norm_type l2): each element
    # in +-eps0 / sqrt(L * d), so E||delta||^2 = eps0^2 / 3, not ||delta|| = eps0
    lengths = attention.sum(1)
    bound = 0.05 / (lengths * 16).sqrt()
    assert (delta.abs().amax(dim=(1, 2)) <= bound + 1e-9).all()
    assert torch.allclose(delta.flatten(1).norm(dim=1), torch.full((4,), 0.05 / 3**0.5), rtol=0.25)
    assert (delta.flatten(1).norm(dim=1) < 0.05).all()
    assert delta[0, 5:].abs().sum() == 0  # padding is never perturbed
    for _ in range(5):
        delta = ascend(delta, torch.randn(4, 7, 16), attention, step=0.3, max_norm=0.2)
        assert (delta.flatten(1).norm(dim=1) <= 0.2 + 1e-6).all()
        assert delta[0, 5:].abs().sum() == 0
    free = ascend(torch.zeros(4, 7, 16), torch.randn(4, 7, 16), attention, step=0.3, max_norm=0.0)
    assert torch.allclose(free.flatten(1).norm(dim=1), torch.full((4,), 0.3))  # L2-normalised step


def _ctx(runner, run_spec, sparsity=0.5, **params):
    spec = run_spec("robust_tickets", suite="adversarial", task="sent_synth", sparsity=sparsity,
                    params={**P, **params}, suite_params={"n": 4, "recipes": "textfooler"})
    return spec, runner.context(spec.candidate(), for_suite=False)


def test_search_trains_only_the_gates_and_leaves_weights_bit_identical(runner, run_spec):
    spec, ctx = _ctx(runner, run_spec, adv_max_norm=0.1)
    start = runner.candidate(run_spec("finetune", task="sent_synth", params={"epochs": 2, "batch_size": 8}))
    p = RobustTicketsParams(**{**P, "adv_max_norm": 0.1})
    masks, info, model = RobustTickets.search(ctx, p, 0.5)
    before = start.model.state_dict()
    after = {k.replace(".parametrizations.weight.original", ".weight"): v for k, v in model.state_dict().items()
             if "log_alpha" not in k and "ticket" not in k}
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(q.grad is None for n, q in model.named_parameters() if "log_alpha" not in n)
    moved = [(g - 2.0).abs().max().item() for n, g in model.named_parameters() if "log_alpha" in n]
    assert max(moved) > 0.02  # the gates trained (they start at 2 + at most 0.01)
    assert info["max_delta_norm"] <= 0.1 + 1e-6
    zeros = sum(int((~m).sum()) for m in masks.values())
    assert zeros == round(0.5 * sum(m.numel() for m in masks.values()))
    assert info["l0_end"] < info["l0_start"]  # the penalty pulls gates towards zero


def test_random_ticket_copies_the_robust_tickets_per_matrix_sparsity(runner, run_spec):
    robust = runner.candidate(_ctx(runner, run_spec, scope="global")[0])
    spec, _ = _ctx(runner, run_spec, ticket="random", scope="global")
    rand = runner.candidate(spec)
    assert rand.info["pattern_from"] == robust.lineage["key"]
    assert robust.sparsity.per_matrix == rand.sparsity.per_matrix
    assert len(set(robust.sparsity.per_matrix.values())) > 1  # global scope: matrices differ
    assert any(not torch.equal(robust.masks[k], rand.masks[k]) for k in robust.masks)
    m = random_like({"a": torch.tensor([[True, False, True, True]])}, seed=0)["a"]
    assert int(m.sum()) == 3


def test_the_search_can_start_from_the_smoothing_trained_twin(runner, run_spec):
    """``start=safer``: stage 1's model is the recipe's SAFER-trained twin, searched as the CE one."""
    spec, ctx = _ctx(runner, run_spec, start="ranmask")
    twin = runner.candidate(run_spec("smoothing_aware", task="sent_synth",
                                     params={"smoothing": "ranmask", "epochs": 2, "batch_size": 8}))
    p = RobustTicketsParams(**{**P, "start": "ranmask"})
    need = RobustTickets().requires(p, 0.5, None)[0]
    assert need.method == "smoothing_aware" and need.params["smoothing"] == "ranmask"
    _, info, model = RobustTickets.search(ctx, p, 0.5)
    before = twin.model.state_dict()
    after = {k.replace(".parametrizations.weight.original", ".weight"): v for k, v in model.state_dict().items()
             if "log_alpha" not in k and "ticket" not in k}
    assert all(torch.equal(before[k], after[k]) for k in before)  # the twin's weights, searched
    assert RobustTickets().label(p) == "robust ticket (retrained, ce, from RanMASK-trained)"


def test_lottery_ticket_is_chen_et_al_global_imp_rewound_every_round(runner, run_spec, tiny_bert, monkeypatch):
    """The IMP-ticket control is the lottery ticket table 1 of Zheng et al. compares with (Chen et
    al. 2020, section 3 and their LT_glue.py): every round a full fine-tuning from the pre-trained
    weights under the mask so far, then 10 % more of the original weights pruned by *global*
    magnitude, then the encoder rewound; the ticket is retrained from the pre-trained weights."""
    import methods.robust_tickets as rt
    from bench.model.backbone import load_classifier
    from bench.model.masking import prunable_linears

    pre = load_classifier(resolve(str(tiny_bert)), 2, seed=0).state_dict()
    starts: list[dict[str, torch.Tensor]] = []
    recipes: list = []
    real_train = rt.train

    def spy(model, tok, ctx, params, *a, **kw):
        starts.append({f"{n}.weight": lin.weight.detach().clone() for n, lin in prunable_linears(model).items()})
        recipes.append((kw.get("desc"), params))
        return real_train(model, tok, ctx, params, *a, **kw)

    monkeypatch.setattr(rt, "train", spy)
    spec, _ = _ctx(runner, run_spec, sparsity=0.3, ticket="imp")
    cand = runner.candidate(spec)
    assert [d for d, _ in recipes] == ["lottery round 1/3", "lottery round 2/3", "lottery round 3/3", "ticket retrain"]
    assert cand.info["lottery_levels"] == pytest.approx([0.1, 0.2, 0.3])
    assert all(r.epochs == P["epochs"] and r.loss == "ce" for _, r in recipes[:3])  # a full fine-tuning a round
    total = sum(w.numel() for w in starts[0].values())
    for k, state in enumerate(starts):  # each round and the retraining start from pre-trained values under the mask
        zeros = sum(int((w == 0).sum()) for w in state.values())
        assert zeros == round(min(k * 0.1, 0.3) * total), k  # exactly k x 10 % pruned before round k + 1
        for name, w in state.items():
            assert torch.equal(w, pre[name] * (w != 0)), name
    per_matrix = set(cand.sparsity.per_matrix.values())
    assert len(per_matrix) > 1  # global magnitude: matrices differ
    assert cand.sparsity.sparsity == pytest.approx(0.3, abs=1e-3)
    assert cand.info["budget_epochs"] == 3 * P["epochs"] + P["retrain_epochs"]


def test_every_ticket_gets_the_same_retraining(runner, run_spec, monkeypatch):
    """Zheng et al. table 5: every ticket, robust or control, is retrained alike (lr 2e-5, wd
    1e-2, 3 epochs, gradient clipping); only what precedes it differs, and is recorded."""
    import methods.robust_tickets as rt

    seen = {}
    real_retrain = rt.RobustTickets.retrain

    def spy(ctx, p, masks, info):
        cand = real_retrain(ctx, p, masks, info)
        seen[p.ticket] = (cand.info["retrain_steps"], p.retrain_lr, p.retrain_epochs, p.weight_decay, p.max_grad_norm)
        return cand

    monkeypatch.setattr(rt.RobustTickets, "retrain", staticmethod(spy))
    for ticket in ("robust", "random", "imp"):
        runner.candidate(_ctx(runner, run_spec, sparsity=0.2, ticket=ticket)[0])
    assert len(set(seen.values())) == 1 and len(seen) == 3
    p = RobustTicketsParams(**P)
    assert rt.budget(p, 0.2)["budget_passes"] == P["epochs"] + P["search_epochs"] * p.adv_steps + P["retrain_epochs"]


@pytest.mark.parametrize(
    "params, message",
    [
        (["lam=-0.5"], "lam (the L0 penalty's lambda) must be >= 0"),
        (["adv_steps=0"], "adv_steps must be at least 1"),
        (["ticket=lucky"], "parameter 'ticket' got 'lucky'"),
        (["ticket=imp", "start=safer"], "the IMP ticket starts from the pre-trained weights"),
    ],
)
def test_bad_parameters(capsys, tmp_path, params, message):
    from bench.cli import main

    argv = ["run", "--method", "robust_tickets", "--suite", "adversarial", "--task", "sent_synth", "--sparsity", "0.5",
            "--out", str(tmp_path)]
    for p in params:
        argv += ["--param", p]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_sparsity_outside_the_range_is_an_error(capsys, tmp_path):
    from bench.cli import main

    assert main(["run", "--method", "robust_tickets", "--suite", "adversarial", "--sparsity", "1.0", "--out", str(tmp_path)]) == 2
    assert "sparsity must be in [0, 1)" in capsys.readouterr().err


def test_freelb_fine_tunes_the_dense_model_adversarially(runner, run_spec, monkeypatch):
    import methods.robust_tickets as rt

    calls = []
    real = rt.freelb_loss
    monkeypatch.setattr(rt, "freelb_loss", lambda *a, **k: calls.append(1) or real(*a, **k))
    spec = run_spec("freelb", suite="adversarial", task="sent_synth", params={"epochs": 1, "batch_size": 8, "adv_steps": 3},
                    suite_params={"n": 4, "recipes": "textfooler"})
    cand = runner.candidate(spec)
    assert len(calls) == cand.info["train_steps"] and cand.sparsity.sparsity == 0.0
