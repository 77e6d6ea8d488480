"""The JSON outputs: scores.json of one run and summary.json of a comparison (standard JSON: NaN/inf -> null)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import fields, is_dataclass
from typing import Any, Protocol, runtime_checkable

from eval.analyze.accuracy import accuracy_json_defaults
from eval.analyze.accuracy_types import DatasetAccuracy
from eval.analyze.agreement import PairStats
from eval.analyze.compare import BOOTSTRAP_RESAMPLES, Comparison, divergence_list
from eval.analyze.score import ScoredRun
from eval.gate.verdict import Verdict
from eval.report.cells import Table

SUMMARY_SCHEMA_VERSION = 1


@runtime_checkable
class JsonPart(Protocol):
    """A typed part with a JSON form of its own (the manifest's parts: eval/records/manifest_parts.py)."""

    def to_dict(self) -> dict[str, Any]: ...


def to_jsonable(obj: Any) -> Any:
    """Dataclasses -> dicts (a manifest part, such as RunInfo.settings, as its `to_dict` writes it in
    manifest.json); NaN/inf (never expected) -> None so the JSON stays standard."""
    if is_dataclass(obj) and not isinstance(obj, type):
        if isinstance(obj, JsonPart):
            return to_jsonable(obj.to_dict())
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def accuracy_json(acc: DatasetAccuracy) -> dict[str, Any]:
    """A dataset's scores.json entry: dataset, metric, passes, then every loaded benchmark's keys (its own figures
    on its datasets, the benchmark's default on the others: LongBench v2's `v2`, {} on a v1 dataset)."""
    own = acc.extras.json_fields() if acc.extras is not None else {}
    entry = {"dataset": acc.dataset, "metric": acc.metric, "passes": acc.passes}
    return dict(to_jsonable({**entry, **accuracy_json_defaults(), **own}))


def scores_json(scored: ScoredRun) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(scored.scores)  # NaN/inf -> null
    data["accuracy"] = [accuracy_json(acc) for acc in scored.scores.accuracy]
    data["examples"] = [
        {
            "dataset": row.dataset,
            "id": row.id,
            "scores": {
                p: (s[row.key].official if row.key in s else None) for p, s in scored.example_scores.items()
            },
        }
        for row in scored.rows
    ]
    return data


def cross_json(s: PairStats | None) -> dict[str, Any] | None:
    """summary.json's `cross_variant` entry: the raw (unrounded) cross-variant figures of one kind."""
    if s is None:
        return None
    return {
        "pass_a": s.pass_a,
        "pass_b": s.pass_b,
        "n_total": s.n_total,
        "n_pairs": s.n_pairs,
        "text_equal": s.text_equal,
        "tokens_equal": s.tokens_equal,
        "first_token_equal": s.first_token_equal,
        "max_delta": s.max_delta,
        "min_overlap": s.min_overlap,
        "errors": s.errors,
        "invalid": s.invalid,
        "missing": s.missing,
        "divergences": [
            {
                "dataset": d.dataset,
                "example_id": d.example_id,
                "repetition": d.repetition,
                "position": d.position,
                "margin_a": d.margin_a,
                "margin_b": d.margin_b,
                "near_tie": d.near_tie,
            }
            for d in s.divergences
        ],
    }


def verdict_json(verdict: Verdict | None) -> dict[str, Any] | None:
    """summary.json's `verdict`: the gate's outcome, exit code, policy, reasons and every rule's result (with
    the table rows it judged); null when the report was written without a policy."""
    if verdict is None:
        return None
    data: dict[str, Any] = to_jsonable(verdict)
    return {"outcome": verdict.outcome, "summary": verdict.summary, **data}


def summary_json(c: Comparison, tables: Sequence[Table], verdict: Verdict | None = None) -> dict[str, Any]:
    """summary.json: every number in the tables (as shown), plus run identities, warnings and the verdict.

    `cross_variant` holds the cross-variant agreement (see CROSS_KINDS) unrounded, with its divergences.
    """
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "verdict": verdict_json(verdict),
        "base": to_jsonable(c.base.scores.run),
        "variant": to_jsonable(c.variant.scores.run),
        "mismatches": to_jsonable(c.mismatches),
        "allow_mismatch": c.allow_mismatch,
        "execution": c.execution,
        "bootstrap": {"seed": c.seed, "n_resamples": BOOTSTRAP_RESAMPLES, "confidence": 0.95},
        "warnings": c.warnings,
        "tables": {t.id: t.as_json() for t in tables},
        "divergences": [dp.as_json() for dp in divergence_list(c)],
        "cross_variant": {name: cross_json(s) for name, s in c.cross_agreement.items()},
        "replica_pairs": _replica_pairs_json(c),
    }


def _replica_pairs_json(c: Comparison) -> list[dict[str, Any]] | None:
    """summary.json's `replica_pairs` (lbeval ab on replicas): per replica pair its raw figures and floors."""
    if c.replica_pairs is None:
        return None
    return [
        {
            "replica": rp.replica,
            "pairs": rp.pairs,
            "inputs": rp.inputs,
            "agreement": cross_json(rp.agreement),
            "timing": to_jsonable(rp.timing),
            "floor_pct": {m: rp.floor(m) for m in rp.timing},
        }
        for rp in c.replica_pairs.pairs
    ]
