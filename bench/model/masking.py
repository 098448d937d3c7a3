"""Weight masks: which matrices are prunable, one mechanism to apply masks, and sparsity.

docs/design.md section 3: sparsity counts Q, K, V, attention-output, FFN-in and FFN-out of every layer
("prunable" weights); classifier and pooler are reported separately; embeddings, biases and
LayerNorm never count. Masks are applied as a weight parametrization (``W -> W * m``), which
serves fixed binary masks (IMP) and learned masks (straight-through, hard-concrete) alike, and
are baked into plain weights on export.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn.utils import parametrize

from bench.errors import BenchError
from bench.metrics import check_sparsity
from bench.model.arch import HEAD, PRUNABLE


def prunable_linears(model: nn.Module) -> dict[str, nn.Linear]:
    out = {n: m for n, m in model.named_modules() if isinstance(m, nn.Linear) and PRUNABLE.search(n)}
    if not out:
        raise BenchError(f"{type(model).__name__} has no BERT, RoBERTa or DistilBERT encoder Linear layers to prune")
    return out


class FixedMask(nn.Module):
    """W -> W * mask with a constant binary mask (IMP, drawn tickets, rewound subnetworks)."""

    def __init__(self, mask: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mask", mask.to(torch.bool))

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return w * self.mask.to(w.dtype)


class ScoreMask(nn.Module):
    """W -> W * m with m = [scores >= threshold] and a straight-through gradient
    (Zhao et al. 2020; Liu et al. 2022, SRNet section 3.2): dL/dscores = dL/dm, so the frozen
    weight is never changed and only the real-valued scores learn which weights to keep.

    ``reset(s)`` moves the threshold so that exactly ``round(s * numel)`` weights are masked:
    halfway between the k-th and (k+1)-th largest score (with hard init this is the paper's
    phi = 0.01 between alpha*phi and 0), and scores tied at the boundary beyond the k kept are
    nudged just below it.
    """

    def __init__(self, scores: torch.Tensor, threshold: float = 0.0) -> None:
        super().__init__()
        self.scores = nn.Parameter(scores.detach().float().clone())
        self.register_buffer("threshold", torch.tensor(float(threshold)))

    @property
    def mask(self) -> torch.Tensor:
        return self.scores.detach() >= self.threshold

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        hard = (self.scores >= self.threshold).to(w.dtype)
        return w * (hard + (self.scores - self.scores.detach()).to(w.dtype))  # value: hard; gradient: identity

    @torch.no_grad()
    def reset(self, sparsity: float) -> None:
        flat = self.scores.data.view(-1)
        keep = flat.numel() - int(round(sparsity * flat.numel()))
        if keep >= flat.numel():
            self.threshold.fill_(float(flat.min()))
            return
        if keep <= 0:
            self.threshold.fill_(float("inf"))
            return
        top = torch.topk(flat, keep + 1)
        kth, nxt = top.values[keep - 1], top.values[keep]
        phi = (kth + nxt) / 2
        if not bool(nxt < phi <= kth):  # adjacent floats or a tie: the k-th value itself
            phi = kth
        tied = flat == phi
        tied[top.indices[:keep]] = False
        flat[tied] = torch.nextafter(phi, torch.tensor(-float("inf"), device=phi.device))
        self.threshold.fill_(float(phi))


class HardConcreteMask(nn.Module):
    """W -> W * z with a hard-concrete gate per weight (Louizos et al. 2018; Robust Tickets,
    Zheng et al. 2022, eq. 3-5): u ~ U(0, 1), s = sigmoid((log u - log(1 - u) + log_alpha) /
    beta), z = clamp(s (zeta - gamma) + gamma, 0, 1). Training samples z; evaluation uses the
    drawn binary ticket (``ticket``), so the search is judged with the mask that will be kept
    (the published code evaluated a soft mask during the search; docs/design.md section 7)."""

    GAMMA, ZETA, BETA = -0.1, 1.1, 2.0 / 3.0

    def __init__(self, log_alpha: torch.Tensor) -> None:
        super().__init__()
        self.log_alpha = nn.Parameter(log_alpha.detach().float().clone())
        self.register_buffer("ticket", torch.ones_like(self.log_alpha, dtype=torch.bool))

    @property
    def mask(self) -> torch.Tensor:
        return self.ticket

    def sample(self) -> torch.Tensor:
        u = torch.rand_like(self.log_alpha).clamp(1e-6, 1 - 1e-6)
        s = torch.sigmoid((torch.log(u) - torch.log(1 - u) + self.log_alpha) / self.BETA)
        return (s * (self.ZETA - self.GAMMA) + self.GAMMA).clamp(0.0, 1.0)

    def p_nonzero(self) -> torch.Tensor:
        """P(z != 0) per weight: the expected-L0 term sigmoid(log_alpha - beta log(-gamma/zeta))."""
        return torch.sigmoid(self.log_alpha - self.BETA * math.log(-self.GAMMA / self.ZETA))

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return w * (self.sample() if self.training else self.ticket).to(w.dtype)


def l0_penalty(gates: list[HardConcreteMask]) -> torch.Tensor:
    """Expected fraction of non-zero weights: mean over every gated weight of P(z != 0)."""
    return torch.cat([g.p_nonzero().flatten() for g in gates]).mean()


@torch.no_grad()
def draw_ticket(gates: list[HardConcreteMask], sparsity: float, scope: str = "global") -> None:
    """Keep the weights with the largest sigmoid(log_alpha) so that exactly round(s * n) are
    pruned: over all gated weights together (``global``) or in every matrix (``local``)."""
    check_sparsity(sparsity)
    groups = [gates] if scope == "global" else [[g] for g in gates]
    for group in groups:
        flat = torch.cat([g.log_alpha.detach().flatten() for g in group])
        keep = flat.numel() - int(round(sparsity * flat.numel()))
        chosen = torch.zeros(flat.numel(), dtype=torch.bool, device=flat.device)
        if keep > 0:
            chosen[torch.topk(flat, keep).indices] = True
        offset = 0
        for g in group:
            n = g.log_alpha.numel()
            g.ticket.copy_(chosen[offset : offset + n].view_as(g.ticket))
            offset += n


def cubic_sparsity(step: int, total: int, initial: float, final: float) -> float:
    """Gradual sparsity (Zhu and Gupta 2018; SRNet section 5.2):
    s_t = s_f + (s_i - s_f)(1 - t/T)^3, s_0 = s_i and s_T = s_f."""
    t = min(max(step, 0), total) / max(total, 1)
    return final + (initial - final) * (1.0 - t) ** 3


def masked_modules(model: nn.Module) -> dict[str, nn.Module]:
    """Every Linear whose weight carries a mask parametrization, by module name."""
    return {n: m for n, m in model.named_modules() if parametrize.is_parametrized(m, "weight")}


def apply_masks(model: nn.Module, masks: dict[str, torch.Tensor]) -> None:
    """Attach a FixedMask to each named Linear's weight, or update the one already there in
    place (so optimizers keep pointing at the same parameters)."""
    linears = dict(model.named_modules())
    for name, mask in masks.items():
        if name not in linears:
            raise BenchError(f"mask names a module '{name}' that the model does not have")
        lin = linears[name]
        if mask.shape != lin.weight.shape:
            raise BenchError(f"mask for {name} has shape {tuple(mask.shape)}, weight has {tuple(lin.weight.shape)}")
        existing = lin.parametrizations.weight[0] if parametrize.is_parametrized(lin, "weight") else None
        if isinstance(existing, FixedMask):
            existing.mask.copy_(mask)
        else:
            parametrize.register_parametrization(lin, "weight", FixedMask(mask.to(lin.weight.device)))


def fix_zeros(model: nn.Module, least: float = 0.01) -> float:
    """Keep a sparse model sparse while it trains: mask the zeros of its prunable matrices where
    they are at least ``least`` of them (a pruned checkpoint, whose masks were baked on export).
    Returns their share (0.0 when nothing was masked)."""
    masks = {n: lin.weight.detach() != 0 for n, lin in prunable_linears(model).items()}
    zeros = sum(int((~m).sum()) for m in masks.values()) / sum(m.numel() for m in masks.values())
    if zeros < least:
        return 0.0
    apply_masks(model, {n: m & current_masks(model).get(n, m) for n, m in masks.items()})
    return zeros


def current_masks(model: nn.Module) -> dict[str, torch.Tensor]:
    """The binary mask of every parametrized weight (FixedMask buffers, else the non-zeros)."""
    out = {}
    for name, mod in masked_modules(model).items():
        p = mod.parametrizations.weight[0]
        out[name] = (p.mask if hasattr(p, "mask") else mod.weight != 0).detach().cpu().clone()
    return out


def bake(model: nn.Module) -> None:
    """Replace every parametrized weight by its masked value (a plain, exportable model)."""
    for mod in model.modules():
        if parametrize.is_parametrized(mod, "weight"):
            parametrize.remove_parametrizations(mod, "weight", leave_parametrized=True)


def magnitude_masks(model: nn.Module, sparsity: float, keep_pruned: bool = True,
                    scope: str = "local") -> dict[str, torch.Tensor]:
    """Magnitude masks keeping the weights of largest |W|: ``numel - round(sparsity * numel)``
    of each prunable matrix (``local``), or of all of them together (``global``, the lottery
    tickets of Chen et al. 2020). Already-pruned weights rank lowest, so pruning only grows (IMP)."""
    check_sparsity(sparsity)
    if scope not in ("local", "global"):
        raise BenchError(f"unknown pruning scope '{scope}'; choose local or global")
    scores = {}
    for name, lin in prunable_linears(model).items():
        w = lin.weight.detach().float().abs()
        if keep_pruned and parametrize.is_parametrized(lin, "weight"):
            w = torch.where(lin.parametrizations.weight[0].mask, w, torch.full_like(w, -1.0))
        scores[name] = w
    return top_masks(scores, sparsity, scope)


def top_masks(scores: dict[str, torch.Tensor], sparsity: float, scope: str = "local") -> dict[str, torch.Tensor]:
    """Keep the highest scores: ``numel - round(sparsity * numel)`` of each matrix (``local``)
    or of all of them together (``global``)."""
    groups = [list(scores)] if scope == "global" else [[n] for n in scores]
    masks = {}
    for names in groups:
        flat = torch.cat([scores[n].flatten() for n in names])
        keep = torch.ones_like(flat, dtype=torch.bool)
        k = int(round(sparsity * flat.numel()))
        if k > 0:
            keep[torch.topk(flat, k, largest=False).indices] = False
        for n, part in zip(names, keep.split([scores[n].numel() for n in names]), strict=True):
            masks[n] = part.view_as(scores[n]).cpu()
    return masks


@dataclass
class SparsityReport:
    """Achieved sparsity, with its denominator and per-matrix values (docs/design.md section 3)."""

    sparsity: float  # zeros / prunable weights
    prunable: int  # the denominator
    zeros: int
    per_matrix: dict[str, float]
    head_sparsity: float  # classifier + pooler, reported separately
    total_params: int
    nonzero_params: int  # total_params less the prunable zeros: alike for every method (head zeros in head_sparsity)

    def to_dict(self) -> dict:
        return asdict(self)


def sparsity_report(model: nn.Module) -> SparsityReport:
    per, zeros, total = {}, 0, 0
    for name, lin in prunable_linears(model).items():
        w = lin.weight
        z = int((w == 0).sum())
        per[name] = z / w.numel()
        zeros += z
        total += w.numel()
    hz = ht = 0
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Linear) and HEAD.search(name):
            hz += int((mod.weight == 0).sum())
            ht += mod.weight.numel()
    params = [p for _, p in _plain_params(model)]
    return SparsityReport(
        sparsity=zeros / total, prunable=total, zeros=zeros, per_matrix=per,
        head_sparsity=hz / ht if ht else 0.0,
        total_params=sum(p.numel() for p in params),
        nonzero_params=sum(p.numel() for p in params) - zeros,  # like for like: see nonzero_params
    )


def _plain_params(model: nn.Module):
    """Parameters with masked weights counted as their masked values."""
    for name, mod in model.named_modules():
        for pname, p in mod.named_parameters(recurse=False):
            if ".parametrizations." in f".{name}." or pname == "original":  # mask scores, gates, originals
                continue
            yield f"{name}.{pname}", p
        if parametrize.is_parametrized(mod, "weight"):
            yield f"{name}.weight", mod.weight
