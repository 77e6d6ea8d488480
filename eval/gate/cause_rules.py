"""The gate's default rules on every cause lbeval measures (registered in eval/gate/rules.py RULES; documented
in eval/gate/policy_default.toml and docs/gate.md).

    cause_rows       relative to the base: on every attribution row both runs measured (cache, batch and each
                     size, hitlen and each class of hit length, repeats, traffic, their sub-rows; row keys as
                     eval/analyze/attribution.AttributionRow.key), the variant may not have more pairs whose
                     tokens differ than the base plus `allowed_drop`, nor a max |top-k logprob delta| above
                     max(base x delta_factor, base + delta_floor, noise x delta_factor), where noise is the
                     engine's own: the largest max |delta| the base measured on its benign rows (batch
                     composition, repeats, replicas: eval/gate/cross_numerics.base_noise). A bf16 engine moves
                     logprobs by ~0.016 with the batch's composition, which a row the base happened to batch
                     alike (delta 0) would otherwise call a fault; dense fp32 kernel noise (3e-5) leaves the
                     floor in charge. A row measured by one run only, or whose
                     scenario ran but planned no pair for it (N = 0: `--batch-sizes 1`, `--hit-lengths` beyond
                     every prompt), is no data unless `skip_one_sided`; no row measured by both is no data.
                     The replica rows (the replicas scenario) are no exception: a variant on 2 replicas
                     against a one-server base has replica rows the base cannot match, so no verdict on them.
    cache_isolation  absolute: a request sent with a salt the run had never sent before (the salt control, cold
                     passes sent by salt, every scenario's fresh salts) must find 0 cached tokens: a hit is a
                     cache isolation fault (a cross-tenant leak where salts separate users). Skipped when no
                     request of any listed run was sent by salt with a cached-token count to check; a run
                     without counts is an unverified cache state (eval/gate/cache_state.py: no data unless
                     the policy accepts it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval.analyze.causes import CauseRow, RowSide, cause_rows
from eval.analyze.compare import Comparison
from eval.analyze.score import ScoredRun
from eval.gate.cross_numerics import base_noise
from eval.gate.verdict import FAIL, NO_DATA, PASS, SKIPPED, RowRef, RuleResult
from eval.records.server_figures import checked_cached
from eval.records.types import RequestRecord

ATTRIBUTION, CACHE = "attribution", "cache"


def delta_limit(base: float | None, p: Mapping[str, Any], noise: float = 0.0) -> float:
    """The largest variant max |delta| a row allows: max(base x delta_factor, base + delta_floor, noise x
    delta_factor), base 0 when it compared no pair, noise the engine's own (the base's benign rows: kernel noise
    3e-5 allows 0.01 by default; a fault's 1.5 is far above)."""
    b, factor = base or 0.0, float(p["delta_factor"])
    return max(b * factor, b + float(p["delta_floor"]), noise * factor)


@dataclass(frozen=True)
class RowJudgement:
    row: CauseRow
    worse: list[str]  # what is worse than the base, in words (empty: not worse)


def judge_row(row: CauseRow, p: Mapping[str, Any], noise: float = 0.0) -> RowJudgement:
    b, v = row.base, row.variant
    assert b is not None and v is not None
    worse = []
    lost = (v.n_total - v.tokens_equal) - (b.n_total - b.tokens_equal)
    if lost > p["allowed_drop"]:
        worse.append(f"tokens equal {v.tokens} vs base {b.tokens} (allowed drop {p['allowed_drop']})")
    limit = delta_limit(b.max_delta, p, noise)
    if v.max_delta is not None and v.max_delta > limit:
        worse.append(f"max |delta| {v.max_delta:.3g} vs base {_delta(b)} (limit {limit:.3g})")
    return RowJudgement(row, worse)


def _delta(s: RowSide) -> str:
    return "n/a" if s.max_delta is None else f"{s.max_delta:.3g}"


def _one_sided(row: CauseRow) -> str:
    if row.base is None and row.variant is None:
        return f"{row.key} (no planned pair: 0/0 in {'both runs' if len(row.empty) == 2 else row.empty[0] + ' run'})"
    side = "base" if row.base is not None else "variant"
    return f"{row.key} (measured by the {side} run only)"


def rule_cause_rows(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    name = "cause_rows"
    noise = base_noise(c.base.scores.attribution)
    threshold = (
        f"per row measured by both: pairs with other tokens <= base's + {p['allowed_drop']}, max |delta| <= "
        f"max(base x {p['delta_factor']:g}, base + {p['delta_floor']:g}"
        + (
            f", the base's own noise {noise.max_delta:.3g} ({noise.row}) x {p['delta_factor']:g})"
            if noise.row
            else ")"
        )
    )
    rows = [r for r in cause_rows(c) if r.base is not None or r.variant is not None or r.empty]
    both = [r for r in rows if r.both]
    mismatched = [
        r
        for r in both
        if r.base is not None and r.variant is not None and r.base.n_total != r.variant.n_total
    ]
    judged = [judge_row(r, p, noise.max_delta) for r in both if r not in mismatched]
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


# ---------------------------------------------------------------- cache isolation


@dataclass(frozen=True)
class SaltCheck:
    """One run's requests that were the first to use their salt: how many report a cached-token count, and
    those that found cached tokens (the leaks)."""

    checked: int
    leaks: list[RequestRecord]


def fresh_salt_check(run: ScoredRun) -> SaltCheck:
    """Every record of the run (superseded groups and retried attempts included: a leak is a fact whatever
    came after it) that was the first to use its cache_salt, by send order."""
    first: dict[str, RequestRecord] = {}
    for rec in sorted(run.loaded.records, key=lambda r: r.seq):
        if rec.cache_salt is not None and rec.cache_salt not in first:
            first[rec.cache_salt] = rec
    counted = [r for r in first.values() if r.status != "error" and checked_cached(r) is not None]
    return SaltCheck(len(counted), [r for r in counted if (checked_cached(r) or 0) > 0])


def _sides(c: Comparison, names: Sequence[str]) -> list[tuple[str, ScoredRun]]:
    return [(n, c.base if n == "base" else c.variant) for n in names]


def rule_cache_isolation(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    name = "cache_isolation"
    threshold = "requests with a salt new to the run that found cached tokens: 0 per run"
    checks = [(side, fresh_salt_check(run)) for side, run in _sides(c, p["runs"])]
    if not any(ch.checked for _, ch in checks):
        return RuleResult(
            name, SKIPPED, "not checked", "no request was sent with a fresh salt and a cached-token count"
        )
    # a run whose server reports no cached-token count is an unverified cache state: eval/gate/cache_state.py
    # gives no data then, unless the policy accepts it (then it is checked on the runs that report counts)
    checks = [(side, ch) for side, ch in checks if ch.checked]
    measured = "; ".join(f"{side} {len(ch.leaks)} of {ch.checked} fresh-salt requests found cached tokens"
                         for side, ch in checks)  # fmt: skip
    leaks = [(side, r) for side, ch in checks for r in ch.leaks]
    rows = (RowRef(CACHE, "control_salt_ok", bool(leaks)),)
    if not leaks:
        return RuleResult(name, PASS, measured, threshold, rows=rows)
    shown = ", ".join(
        f"{side} {r.dataset}/{r.example_id} {r.pass_name} rep {r.repetition}: {checked_cached(r)} cached"
        for side, r in leaks[:4]
    )
    more = f" and {len(leaks) - 4} more" if len(leaks) > 4 else ""
    detail = f"cache_salt accepted but not honoured: a cache isolation fault ({shown}{more})"
    return RuleResult(name, FAIL, measured, threshold, detail, rows)
