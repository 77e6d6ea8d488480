"""The interleaved A/B timing table (runs of one `lbeval ab` session): per measure the paired-in-time change,
the sequential-style figure beside it, the pairs counted and left out, and the drift check in words."""

from __future__ import annotations

from eval.analyze.ab_timing import PairedMeasure
from eval.analyze.compare import Comparison
from eval.report.cells import Cell, Interval, Num, Row, Table, Text

PAIRED_ROWS = [
    ("warm_prefill_ms", "warm prefill, server"),
    ("warm_ttft_ms", "warm TTFT, client"),
    ("cold_prefill_ms", "cold prefill, server"),
    ("cold_ttft_ms", "cold TTFT, client"),
]


def _cells(pm: PairedMeasure) -> list[Cell]:
    p, s, d, m, g = pm.paired, pm.sequential_style, pm.drift, pm.paired_median, pm.gated
    return [
        Interval(g.estimate, g.ci_low, g.ci_high, 1, "%") if g is not None else None,
        Interval(p.estimate, p.ci_low, p.ci_high, 1, "%") if p is not None else None,
        Interval(m.estimate, m.ci_low, m.ci_high, 1, "%") if m is not None else None,
        Interval(s.estimate, s.ci_low, s.ci_high, 1, "%") if s is not None else None,
        Num(pm.n_pairs, 0),
        Num(pm.left_out, 0),
        Num(d.paired.pct_over_span, 1, "%", signed=True) if d is not None else None,
        Text(("DRIFT" if pm.drifting else "none") if d is not None else "too few pairs"),
    ]


def paired_timing_table(c: Comparison) -> Table | None:
    pt = c.paired
    if pt is None:
        return None
    rows = [Row(key, label, _cells(pt.measures[key])) for key, label in PAIRED_ROWS if key in pt.measures]
    readings = [
        f"{label}: {pt.measures[key].reading}" for key, label in PAIRED_ROWS if pt.measures[key].reading
    ]
    drifting = pt.drifting
    reading = f"Interleaved A/B session ({pt.adjacent} of {pt.pairs} pairs adjacent in time): " + (
        f"drift flagged in {', '.join(drifting)}." if drifting else "no drift flagged."
    )
    if pt.adaptive is not None:  # lbeval ab --timing-until
        reading += f" Adaptive timing: {pt.adaptive.headline()}."
    note = (
        "gated: the 20 % trimmed mean of the per-input mean log(b/a) with Yuen's 97.5 % t interval over inputs, "
        "the figure the gate reads (its A/A false-alarm rate stayed at most 5 % in every cell of simulated "
        "sessions with heavy-tailed and bursty noise, docs/timing.md); "
        "paired: exp(mean log(b/a)) - 1 over the pairs of adjacent requests, cluster bootstrap over inputs (pairs "
        "of an input kept together); paired median: exp(median log(b/a)) - 1, the typical "
        "pair's change, which a burst of other work hitting one side of a few pairs does not move; a mean well "
        "above the median means a few slow pairs, not a uniform change; sequential-style: median(b)/median(a) - 1 of the same requests as two "
        "samples. Drift: Theil-Sen slope and Mann-Kendall test over session time of the paired log ratio and of "
        "each server's own log times (drift: p < 0.01 and at least 5 %/h); a trend is shown as the change its slope "
        "makes over the session's time span (not extrapolated). " + " ".join(f"{r}." for r in readings)
    )
    columns = ["measure", "gated: trimmed mean [97.5% CI]", "paired change [95% CI]", "paired median [95% CI]", "sequential-style [95% CI]",
               "pairs", "left out", "paired trend over the session", "drift"]  # fmt: skip
    return Table(
        "paired_timing", "Interleaved A/B timing (pairs adjacent in time)", reading, columns, rows, note
    )
