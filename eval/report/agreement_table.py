"""The agreement tables: how often cold and warm (and base and variant) answers agree token for token, where
they first diverge, and their readings."""

from __future__ import annotations

import math

from eval.analyze.agreement import NEAR_TIE_MARGIN, PairStats
from eval.analyze.compare import Comparison
from eval.analyze.score import RunScores
from eval.report.cells import Cell, Frac, Ints, Num, Row, Sci, Table
from eval.report.columns import side_columns

MAX_POSITIONS_SHOWN = 12


def _frac_equal(s: PairStats | None, attr: str) -> Cell:
    return None if s is None else Frac(int(getattr(s, attr)), s.n_total)


def _near_ties(s: PairStats | None) -> Cell:
    if s is None:
        return None
    return Frac(sum(d.near_tie for d in s.divergences), len(s.divergences))


def _positions(s: PairStats | None) -> Cell:
    if s is None:
        return None
    return Ints(tuple(sorted(d.position for d in s.divergences))[:MAX_POSITIONS_SHOWN])


AGREEMENT_ROWS: list[tuple[str, str, str, str]] = [
    # key, label, pair kind, what
    ("cold_warm_text", "cold/warm outputs equal (text)", "cold_warm", "text_equal"),
    ("cold_warm_tokens", "cold/warm outputs equal (token IDs)", "cold_warm", "tokens_equal"),
    (
        "cold_warm_positions",
        f"cold/warm first divergence positions (first {MAX_POSITIONS_SHOWN})",
        "cold_warm",
        "positions",
    ),
    (
        "cold_warm_near_ties",
        f"cold/warm divergences at a near tie (margin < {NEAR_TIE_MARGIN})",
        "cold_warm",
        "near_ties",
    ),
    ("cold_warm_max_delta", "cold/warm max |top-k logprob delta| (full outputs)", "cold_warm", "max_delta"),
    ("cold_warm_min_overlap", "cold/warm min top-k overlap (full outputs)", "cold_warm", "min_overlap"),
    ("warm_repeat_text", "warm/repeat outputs equal (text)", "warm_repeat", "text_equal"),
    ("warm_repeat_tokens", "warm/repeat outputs equal (token IDs)", "warm_repeat", "tokens_equal"),
    ("first_token", "first token equal, timing cold/warm (N x R)", "timing_first_token", "first_token_equal"),
    ("first_token_max_delta", "first token max |top-k logprob delta|", "timing_first_token", "max_delta"),
    ("first_token_min_overlap", "first token min top-k overlap", "timing_first_token", "min_overlap"),
]


# base vs variant (the `base vs variant` column): key, label, cross kind (eval.analyze.compare.CROSS_KINDS), what
CROSS_ROWS: list[tuple[str, str, str, str]] = [
    ("cross_cold_text", "base cold vs variant cold: outputs equal (text)", "cold", "text_equal"),
    ("cross_cold_tokens", "base cold vs variant cold: outputs equal (token IDs)", "cold", "tokens_equal"),
    ("cross_cold_first_token", "base cold vs variant cold: first token equal", "cold", "first_token_equal"),
    (
        "cross_cold_positions",
        f"base cold vs variant cold: first divergence positions (first {MAX_POSITIONS_SHOWN})",
        "cold",
        "positions",
    ),
    (
        "cross_cold_near_ties",
        f"base cold vs variant cold: divergences at a near tie (margin < {NEAR_TIE_MARGIN})",
        "cold",
        "near_ties",
    ),
    ("cross_cold_max_delta", "base cold vs variant cold: max |top-k logprob delta|", "cold", "max_delta"),
    ("cross_cold_min_overlap", "base cold vs variant cold: min top-k overlap", "cold", "min_overlap"),
    ("cross_warm_text", "base warm vs variant warm: outputs equal (text)", "warm", "text_equal"),
    ("cross_warm_tokens", "base warm vs variant warm: outputs equal (token IDs)", "warm", "tokens_equal"),
    ("cross_warm_max_delta", "base warm vs variant warm: max |top-k logprob delta|", "warm", "max_delta"),
    (
        "cross_first_token",
        "first token equal, timing base vs variant (N x R x 2: timing cold, timing warm)",
        "timing_first_token",
        "first_token_equal",
    ),
    (
        "cross_first_token_max_delta",
        "first token max |top-k logprob delta|, timing base vs variant",
        "timing_first_token",
        "max_delta",
    ),
    (
        "cross_first_token_min_overlap",
        "first token min top-k overlap, timing base vs variant",
        "timing_first_token",
        "min_overlap",
    ),
]
CROSS_COLUMN = "base vs variant"


def _agreement_cell(scores: RunScores, kind: str, what: str) -> Cell:
    return _stats_cell(scores.agreement.get(kind), what)


def _stats_cell(s: PairStats | None, what: str) -> Cell:
    if what == "positions":
        return _positions(s)
    if what == "near_ties":
        return _near_ties(s)
    if what == "max_delta":
        return None if s is None else Sci(s.max_delta)
    if what == "min_overlap":
        return None if s is None or s.min_overlap is None else Num(s.min_overlap, 0)
    return _frac_equal(s, what)


def agreement_table(c: Comparison) -> Table:
    """Agreement within each variant: one column per run (base vs variant is the next table)."""
    rows = [
        Row(key, label, [_agreement_cell(run.scores, kind, what) for run in (c.base, c.variant)])
        for key, label, kind, what in AGREEMENT_ROWS
    ]
    b, v = c.base.scores.unique, c.variant.scores.unique
    rows.append(
        Row(
            "multiple_outputs",
            "prompts with more than one distinct output (cold, warm, repeat)",
            [Frac(b.n_multiple, b.n_prompts), Frac(v.n_multiple, v.n_prompts)],
        )
    )
    return Table(
        "agreement",
        "Agreement within each variant",
        agreement_reading(c),
        ["measure", *side_columns(c)],
        rows,
        AGREEMENT_NOTE,
    )


def cross_table(c: Comparison) -> Table:
    """Agreement between the two runs: the same pass of base and variant compared on each input."""
    rows = [
        Row(key, label, [_stats_cell(c.cross_agreement.get(kind), what)])
        for key, label, kind, what in CROSS_ROWS
    ]
    reading = cross_reading(c.cross_agreement.get("cold"))
    warm = c.cross_agreement.get("warm")
    if warm is not None:
        reading += f"; warm outputs equal {warm.text_equal}/{warm.n_total}"
    return Table(
        "cross",
        "Agreement between base and variant",
        reading[0].upper() + reading[1:] + ".",
        ["measure", CROSS_COLUMN],
        rows,
        CROSS_NOTE,
    )


AGREEMENT_NOTE = (
    "Top-k deltas and overlaps are taken over the positions up to the first divergence. N counts every input, "
    "including errored, invalid and missing samples."
)
CROSS_NOTE = (
    "Base vs variant compares the same pass of the two runs on each input (cold with cold, warm with warm, "
    "timing repetition r with r); top-k deltas and overlaps are taken over the positions up to the first "
    "divergence. N counts every input, including errored, invalid and missing samples."
)


def _kn(s: PairStats | None, attr: str) -> str:
    return "n/a" if s is None else f"{getattr(s, attr)}/{s.n_total}"


def agreement_reading(c: Comparison) -> str:
    parts = []
    for label, kind, attr in (
        ("cold/warm", "cold_warm", "text_equal"),
        ("warm/repeat", "warm_repeat", "text_equal"),
        ("first-token", "timing_first_token", "first_token_equal"),
    ):
        vb, vv = c.base.scores.agreement.get(kind), c.variant.scores.agreement.get(kind)
        parts.append(f"{label} {_kn(vv, attr)} (base {_kn(vb, attr)})")
    text = "Variant " + ", ".join(parts) + "; " + cross_reading(c.cross_agreement.get("cold")) + "."
    return text + unverified_note(c)


def unverified_note(c: Comparison) -> str:
    """A reading's tail when a run's cache state is unverified: its cold/warm labels are what was sent."""
    sides = [
        side
        for side, run in (("base", c.base), ("variant", c.variant))
        if run.scores.cache_verification is not None and not run.scores.cache_verification.verified
    ]
    if not sides:
        return ""
    return (
        f" Cache state UNVERIFIED in {' and '.join(sides)}: its cold, warm and repeat passes are what lbeval "
        "sent, not cache states the server confirmed."
    )


def cross_reading(s: PairStats | None) -> str:
    if s is None:
        return "base vs variant cold outputs: n/a"
    delta = "n/a" if s.max_delta is None or not math.isfinite(s.max_delta) else f"{s.max_delta:.3g}"
    return (
        f"base vs variant cold outputs equal {s.text_equal}/{s.n_total} (token IDs {s.tokens_equal}/{s.n_total}), "
        f"max top-k logprob |delta| {delta}"
    )
