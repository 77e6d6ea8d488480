"""cause_rows: relative to the base, on every attribution row both runs measured (cache, batch and each size,
hitlen and each class of hit length, repeats, traffic, replicas, their sub-rows; row keys as
eval/analyze/attribution.AttributionRow.key), the variant may not be worse than the base (the row judgement:
eval/gate/cause_rules.py). A bf16 engine moves logprobs by ~0.016 with the batch's composition, which a row the
base happened to batch alike (delta 0) would otherwise call a fault: the base's own noise on its benign rows,
or the engine's smallest step on any base row when larger, raises the limit; dense fp32 kernel noise (3e-5)
leaves the floor in charge. A row measured by one run only, or
whose scenario ran but planned no pair for it (N = 0: `--batch-sizes 1`, `--hit-lengths` beyond every prompt), is
no data unless `skip_one_sided`; no row measured by both is no data. The replica rows are no exception: a
variant on 2 replicas against a one-server base has replica rows the base cannot match, so no verdict on them.
Needs a verified cache state.

Settling early (how "count"): FAIL as soon as a row both runs measured has more pairs with other tokens in the
variant than the base could still reach, its count plus allowed_drop plus the pairs of that row the remaining
inputs plan (`remaining_pairs`); its max |delta| part and a PASS settle with the full run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval.analyze.causes import CauseRow, cause_rows
from eval.analyze.compare import Comparison
from eval.gate.cause_rules import judge_row
from eval.gate.cross_numerics import base_noise, engine_step
from eval.gate.rule import (
    COUNT,
    DELTA,
    FACTOR,
    FAIL,
    NO_DATA,
    PASS,
    Look,
    RowRef,
    Rule,
    RuleResult,
    full_run,
    register,
)
from eval.records.stop import SETTLED_FAIL, RuleSettlement

__all__ = ["RULE", "remaining_pairs", "rule_cause_rows"]

NAME = "cause_rows"
ATTRIBUTION = "attribution"


def _one_sided(row: CauseRow) -> str:
    if row.base is None and row.variant is None:
        return f"{row.key} (no planned pair: 0/0 in {'both runs' if len(row.empty) == 2 else row.empty[0] + ' run'})"
    side = "base" if row.base is not None else "variant"
    return f"{row.key} (measured by the {side} run only)"


def engine_noise(c: Comparison) -> tuple[float, str | None]:
    """The engine's own noise a row's limit allows for, and the base row it was measured on: the larger of the
    base's benign rows' noise (batch composition, repeats, replicas) and the engine's smallest step on any base
    row (cross_numerics.engine_step): a bf16 server's batch row may run alike in one run and one step apart in
    the next."""
    noise = base_noise(c.base.scores.attribution)
    step, row = engine_step(c.base.scores.attribution)
    return (noise.max_delta, noise.row) if noise.max_delta >= step else (step, row)


def rule_cause_rows(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    name = NAME
    level, where = engine_noise(c)
    threshold = (
        f"per row measured by both: pairs with other tokens <= base's + {p['allowed_drop']}, max |delta| <= "
        f"max(base x {p['delta_factor']:g}, base + {p['delta_floor']:g}"
        + (f", the base's own noise {level:.3g} ({where}) x {p['delta_factor']:g})" if where else ")")
    )
    rows = [r for r in cause_rows(c) if r.base is not None or r.variant is not None or r.empty]
    both = [r for r in rows if r.both]
    mismatched = [
        r
        for r in both
        if r.base is not None and r.variant is not None and r.base.n_total != r.variant.n_total
    ]
    judged = [judge_row(r, p, level) for r in both if r not in mismatched]
    failing = [j for j in judged if j.worse]
    one_sided = [_one_sided(r) for r in rows if not r.both]
    unmatched = [f"{r.key} (N {r.base.n_total} vs {r.variant.n_total}: other plans)" for r in mismatched
                 if r.base is not None and r.variant is not None]  # fmt: skip
    refs = tuple(RowRef(ATTRIBUTION, j.row.key, bool(j.worse)) for j in judged)
    measured = f"{len(judged)} rows measured by both runs, {len(failing)} worse than the base"
    if failing:
        measured += ": " + ", ".join(j.row.key for j in failing)
        detail = "; ".join(f"{j.row.key}: {', '.join(j.worse)}" for j in failing)
        return RuleResult(name, FAIL, measured, threshold, detail, refs)
    missing = unmatched + ([] if p["skip_one_sided"] else one_sided)
    if missing:
        return RuleResult(
            name, NO_DATA, f"{measured}; not comparable: {', '.join(missing)}", threshold, rows=refs
        )
    if not judged:
        return RuleResult(name, NO_DATA, "no cause row measured by both runs", threshold)
    skipped = f" (skipped, measured by one run only: {', '.join(one_sided)})" if one_sided else ""
    return RuleResult(name, PASS, measured + skipped, threshold, rows=refs)


def settle(look: Look, p: Mapping[str, Any]) -> RuleSettlement:
    """FAIL as soon as a row both runs measured has more pairs with other tokens in the variant than the base
    could still match: the base's count plus `allowed_drop` plus every pair of that row the remaining inputs
    plan (bounded by `remaining_pairs`). The max |delta| part and a PASS settle with the full run (the base's
    max delta over the remaining inputs is unbounded)."""
    left = look.n - look.k
    both = [row for row in cause_rows(look.c) if row.both]
    for row in both:
        b, v = row.base, row.variant
        if b is None or v is None or b.n_total != v.n_total:
            continue
        lost = (v.n_total - v.tokens_equal) - (b.n_total - b.tokens_equal) - p["allowed_drop"]
        bound = remaining_pairs(row, both, look.k, left)
        if lost > bound:
            detail = (
                f"{row.key}: tokens equal {v.tokens} vs base {b.tokens} after {look.k} of {look.n} inputs; the "
                f"base's remaining inputs plan at most {bound} more pairs of this row: cannot catch up"
            )
            return RuleSettlement(NAME, SETTLED_FAIL, "count", detail)
    return full_run(look, NAME)


def remaining_pairs(row: CauseRow, rows: Sequence[CauseRow], k: int, left: int) -> int:
    """An upper bound on the pairs of `row` the remaining `left` inputs plan: per input, as many as the inputs
    run planned on average, rounded up (the cache, batch, repeats and traffic rows plan a fixed number per
    input; a hitlen class at most one), and for the hitlen row at least one per hitlen class seen."""
    assert row.base is not None
    per_input = -(-row.base.n_total // max(k, 1))
    if row.key == "hitlen":
        per_input = max(per_input, sum(r.key.startswith("hitlen_") for r in rows) + 1)
    return per_input * left


def unplanned(c: Comparison) -> str:
    """Not planned: neither run planned a pass pair or scenario that a cause row compares."""
    if [row for row in cause_rows(c) if row.base or row.variant or row.empty]:
        return ""
    return "not planned: neither run planned a pass pair or scenario that a cause row compares"


RULE = register(
    Rule(NAME, 150, "no attribution row both runs measured is worse in the variant than in the base",
         {"allowed_drop": (COUNT, 0), "delta_factor": (FACTOR, 10.0), "delta_floor": (DELTA, 0.01),
          "skip_one_sided": (bool, False)}, rule_cause_rows, settle, needs_verified_cache=True,
         unplanned=unplanned, names_rows=True)
)  # fmt: skip
