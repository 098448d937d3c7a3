"""The harness's TextAttack model wrapper: what TextAttack's HuggingFaceModelWrapper does, fast.

TextAttack's wrapper pads every query to the tokenizer's ``model_max_length`` (512 for BERT)
and never calls ``model.eval()`` (docs/design.md section 7). This one evaluates in eval mode, pads
each batch only to its longest query (queries sorted by length), truncates at the task's
``max_length`` as training and the OOD suite do, runs under optional bf16 autocast on the
run's device, and keeps an LRU cache of logits for repeated queries (TextAttack's own cache
is cleared after every example; the clean query of an example recurs across recipes).

Queries are still counted by TextAttack's goal function, one per text passed to it, cached or
not, so #Query is the same as with TextAttack's wrapper.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch

from bench.model.accel import to_device
from bench.model.predict import autocast, collate
from suites.adversarial.resources import textattack


def make_wrapper(model, tokenizer, max_length: int, device: torch.device, precision: str = "fp32",
                 batch_size: int = 64, cache_size: int = 2**16):
    ta = textattack()

    class HarnessModelWrapper(ta.models.wrappers.ModelWrapper):
        def __init__(self) -> None:
            self.model = model.to(device).eval()
            self.tokenizer = tokenizer
            self.cache: OrderedDict = OrderedDict()
            self.calls = 0  # texts that reached the model (cache misses)

        def __call__(self, text_input_list):
            keys = [t if isinstance(t, str) else tuple(t) for t in text_input_list]
            todo = [k for k in dict.fromkeys(keys) if k not in self.cache]
            if todo:
                for k, row in zip(todo, self._run(todo), strict=True):
                    self.cache[k] = row
                    if len(self.cache) > cache_size:
                        self.cache.popitem(last=False)
            out = []
            for k in keys:
                self.cache.move_to_end(k)
                out.append(self.cache[k])
            return np.stack(out)

        @torch.no_grad()
        def _run(self, texts: list) -> list[np.ndarray]:
            self.calls += len(texts)
            pairs = not isinstance(texts[0], str)
            enc = tokenizer([t[0] for t in texts] if pairs else texts, [t[1] for t in texts] if pairs else None,
                            truncation=True, max_length=max_length)
            names = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
            items = [{k: enc[k][i] for k in names} for i in range(len(texts))]
            order = sorted(range(len(items)), key=lambda i: len(items[i]["input_ids"]))
            rows: list[np.ndarray] = [None] * len(items)  # type: ignore[list-item]
            for s in range(0, len(order), batch_size):
                idx = order[s : s + batch_size]
                batch = collate([items[i] for i in idx], tokenizer.pad_token_id)
                with autocast(device, precision):
                    logits = self.model(**to_device(batch, device)).logits.float().cpu().numpy()
                for j, i in enumerate(idx):
                    rows[i] = logits[j]
            return rows

        def _tokenize(self, inputs):
            return [tokenizer.convert_ids_to_tokens(tokenizer([x], truncation=True)["input_ids"][0]) for x in inputs]

    return HarnessModelWrapper()
