"""Records of schema 1 rewritten as schema 2, the first step of ``bench migrate``
(``bench.core.upgrade`` runs the steps), so that a reader knows one format. The run, its id
and its predictions are unchanged; what the old format left
to the leaderboard is written into the record, by the rule that leaderboard used, and the
record says it was migrated (``provenance.migrated``).

Schema 1 to 2:

- ``params`` were stored twice (in full, and as their non-default values in
  ``provenance.config.params``): the copy in the configuration goes.
- ``variant``: those non-default values that the method's label does not show. Schema-1
  leaderboards left out the same five names for every method (``loss``, ``rewind``,
  ``paradigm``, ``retrain_loss``, ``ticket``); schema 2 asks the method (``Method.labelled``).
- ``method_info.kept``: the step kept and the steps run, which schema-1 leaderboards read from
  ``best_step`` over ``train_steps`` or ``retrain_steps`` (training) and ``search_best_step``
  over ``search_steps`` (a ticket search).
- ``baseline``: the artifact of the candidate the record is compared with. A record that names
  its F_bias ``reference`` gets that record's artifact; one that names none (an attack study)
  gets the dense ``finetune (ce)`` candidate of its seed and suite in the same folder, the one
  with the fewest settings (none on a tie): the row schema-1 leaderboards fell back to.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

SHOWN_IN_LABEL_V1 = ("loss", "rewind", "paradigm", "retrain_loss", "ticket")
KEPT_V1 = {"training": ("best_step", ("train_steps", "retrain_steps")), "ticket search": ("search_best_step", ("search_steps",))}
REFERENCE_LABEL_V1 = "finetune (ce)"


def _kept(info: dict) -> list:
    out = []
    for stage, (best, runs) in KEPT_V1.items():
        run = next((r for r in runs if r in info), None)
        if best in info and run is not None:
            out.append([stage, info[best], info[run]])
    return out


def _settings(d: dict) -> tuple:
    """What schema-1 leaderboards counted as a row's settings: its variant and run settings."""
    conf = d["provenance"].get("config", {})
    run = [conf.get("max_examples"), *(v for v in (conf.get("precision"), conf.get("device")) if v not in ("fp32", "cpu")),
           conf.get("compile")]
    return (*d["variant"], *(str(v) for v in run if v))


def _suite_key(d: dict) -> tuple:
    return d["task"], d["backbone"], d["seed"], d["suite"], json.dumps(d["provenance"].get("config", {}).get("suite_params", {}),
                                                                       sort_keys=True)


def _baselines(records: dict[str, dict], others: list[dict]) -> None:
    """Each record's ``baseline``, by the schema-1 leaderboard's rule (module docstring), found
    among these records and the folder's ``others`` (already current)."""
    every = [*records.values(), *others]
    by_id = {d["run_id"]: d for d in every}
    fallback: dict[tuple, list[dict]] = {}
    for d in every:
        if d["label"] == REFERENCE_LABEL_V1 and d["sparsity"].get("target") is None:
            fallback.setdefault(_suite_key(d), []).append(d)
    for d in records.values():
        if d.get("reference"):
            ref = by_id.get(d["reference"])
            d["baseline"] = ref["artifact"]["key"] if ref else None
            continue
        pool = sorted(fallback.get(_suite_key(d), []), key=lambda r: len(_settings(r)))
        tied = [r for r in pool if len(_settings(r)) == len(_settings(pool[0]))] if pool else []
        d["baseline"] = tied[0]["artifact"]["key"] if len(tied) == 1 else None


def upgrade(records: dict[str, dict], version: str, others: list[dict] = ()) -> dict[str, dict]:
    """Schema-1 record objects (file name -> object) as schema 2; ``others``: the folder's
    current records, which a schema-1 record may name as its reference."""
    note = {"from_schema": 1, "by": f"bench {version}", "on": datetime.now(UTC).isoformat(timespec="seconds")}
    for d in records.values():
        conf = d["provenance"].setdefault("config", {})
        overrides = conf.pop("params", {})
        d["variant"] = [f"{k}={v}" for k, v in sorted(overrides.items()) if k not in SHOWN_IN_LABEL_V1]
        kept = _kept(d.get("method_info") or {})
        if kept:
            d["method_info"]["kept"] = kept
        d["provenance"]["migrated"] = note
        d["schema_version"] = 2
    _baselines(records, list(others))
    return records
