"""How the gate's `cause_rows` rule (eval/gate/ruleset/cause_rows.py) judges one attribution row both runs
measured against the base: the variant may not have more pairs whose tokens differ than the base plus
`allowed_drop`, nor a max |top-k logprob delta| above max(base x delta_factor, base + delta_floor, noise x
delta_factor), where noise is the engine's own (eval/gate/cross_numerics.base_noise).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval.analyze.causes import CauseRow, RowSide


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
