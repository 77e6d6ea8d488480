"""Base vs variant on every cause row: each attribution row (eval/analyze/attribution.py, by its key) as both
runs measured it, for the gate's `cause_rows` rule (eval/gate/ruleset/cause_rows.py) and the one-screen summary
(eval/report/console.py), which read these and compute nothing of their own.

A side of a row is None when that run did not measure the row (the scenario was not run, or the row has no
planned pair: N = 0, e.g. `--hit-lengths 100000` sends no prime, `--batch-sizes 1` forms no batch; `empty`
names the runs of that second kind).
Rows are listed in the variant's order, then the rows only the base has.
"""

from __future__ import annotations

from dataclasses import dataclass

from eval.analyze.attribution import AttributionRow
from eval.analyze.compare import Comparison
from eval.analyze.score import ScoredRun


@dataclass(frozen=True)
class RowSide:
    """One run's figures on a row: k/N token- and text-equal pairs, the max |top-k logprob delta|."""

    n_total: int
    tokens_equal: int
    text_equal: int
    max_delta: float | None  # None: no pair both ok

    @property
    def tokens(self) -> str:
        return f"{self.tokens_equal}/{self.n_total}"


@dataclass(frozen=True)
class CauseRow:
    key: str  # AttributionRow.key
    level: int  # 0 a cause, 1 one value of what it varied
    cause: str
    base: RowSide | None  # None: not measured by the base run
    variant: RowSide | None
    # the runs ("base", "variant") that ran the row's scenario but planned no pair for it (N = 0)
    empty: tuple[str, ...] = ()

    @property
    def both(self) -> bool:
        return self.base is not None and self.variant is not None

    @property
    def differs(self) -> bool:
        """Measured on one side only, or other k/N (tokens or text, or another N) on the two sides."""
        if self.base is None or self.variant is None:
            return self.base is not self.variant
        b, v = self.base, self.variant
        return (b.n_total, b.tokens_equal, b.text_equal) != (v.n_total, v.tokens_equal, v.text_equal)


def _empty(row: AttributionRow | None) -> bool:
    return row is not None and row.measured and row.pairs is not None and row.pairs.n_total == 0


def _side(row: AttributionRow | None) -> RowSide | None:
    if row is None or not row.measured or row.pairs is None or row.pairs.n_total == 0:
        return None
    s = row.pairs
    return RowSide(s.n_total, s.tokens_equal, s.text_equal, s.max_delta)


def _rows(run: ScoredRun) -> list[AttributionRow]:
    att = run.scores.attribution
    return list(att.rows) if att is not None else []


def cause_rows(c: Comparison) -> list[CauseRow]:
    """Every attribution row of either run, with both sides (module docstring)."""
    base = {r.key: r for r in _rows(c.base)}
    variant = {r.key: r for r in _rows(c.variant)}
    order = list(variant) + [k for k in base if k not in variant]
    out = []
    for key in order:
        row = variant.get(key) or base[key]
        b, v = base.get(key), variant.get(key)
        empty = tuple(side for side, r in (("base", b), ("variant", v)) if _empty(r))
        out.append(CauseRow(key, row.level, row.cause, _side(b), _side(v), empty))
    return out
