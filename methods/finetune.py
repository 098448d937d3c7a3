"""Full fine-tuning of the backbone with a standard or debiasing loss (docs/design.md section 4).

With ``loss=ce`` this is the "full" model every F_bias is measured against.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.api import Candidate, Context, Method
from bench.errors import BenchError
from bench.model.backbone import load_classifier, load_tokenizer
from bench.registry import METHODS
from bench.train.loop import TrainParams, train
from bench.train.objectives import make_loss


@dataclass
class FinetuneParams(TrainParams):
    # > 0: the model at this step of the recipe (for "when to start searching" studies),
    # not the best checkpoint by ID dev
    checkpoint_step: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.checkpoint_step < 0:
            raise BenchError(f"checkpoint_step must be at least 0, got {self.checkpoint_step}")


@METHODS.register("finetune")
class Finetune(Method):
    name = "finetune"
    description = "dense fine-tuning with loss ce | poe | reweight | confreg (the full-model reference)"
    Params = FinetuneParams
    reference = True  # its loss=ce model is every F_bias reference and the confreg teacher

    def build(self, ctx: Context, params: FinetuneParams) -> Candidate:
        tok = load_tokenizer(ctx.backbone)
        model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        loss_fn, info = make_loss(params.loss, ctx, model, tok)
        result = train(model, tok, ctx, params, loss_fn, stop_at=params.checkpoint_step, desc=f"finetune {params.loss}")
        info.update(best_step=result.best_step, best_dev=result.best_dev, train_steps=result.steps, kept=[result.kept()],
                    train_seconds=result.seconds, history=result.history)
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)
