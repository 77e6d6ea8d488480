"""The timing table: warm and cold prefill (server) and TTFT (client) on both sides and each change, with its
reading and the note on how the two runs were placed in time."""

from __future__ import annotations

from eval.analyze.compare import BOOTSTRAP_RESAMPLES, Change, Comparison
from eval.report.cells import Flag, Num, Row, Table, Text
from eval.report.columns import change_cell, side_columns
from scorers.stats import signed_pct

TIMING_ROWS = [
    ("warm_prefill_ms", "warm prefill, server (ms)"),
    ("warm_ttft_ms", "warm TTFT, client (ms)"),
    ("cold_prefill_ms", "cold prefill, server (ms)"),
    ("cold_ttft_ms", "cold TTFT, client (ms)"),
]


def timing_table(c: Comparison) -> Table:
    tb, tv = c.base.scores.timing, c.variant.scores.timing
    rows = []
    for key, label in TIMING_ROWS:
        ch = c.timing_changes.get(key)
        rows.append(
            Row(
                key,
                label,
                [
                    Num(tb.means.get(key), 1),
                    Num(tv.means.get(key), 1),
                    change_cell(ch, "%", 1),
                    Num(ch.n_inputs if ch else 0, 0),
                ],
            )
        )
    rows.append(Row("reps", "repetitions per input", [Num(tb.reps, 0), Num(tv.reps, 0), None, None]))
    rows.append(
        Row(
            "foreign",
            "foreign: server figures not the request's own, left out (k of N)",
            [Text(f"{t.foreign} of {t.with_figures}") for t in (tb, tv)] + [None, None],
        )
    )
    rows.append(
        Row(
            "valid",
            "timing valid (timing passes at concurrency 1)",
            [Flag(tb.valid), Flag(tv.valid), None, None],
        )
    )
    level = next((ch.ci_label for ch in c.timing_changes.values() if ch is not None), "95% CI")
    columns = ["measure", *side_columns(c), f"change [{level}]", "inputs"]
    return Table(
        "timing",
        "Timing (mean over inputs of per-input means)",
        timing_reading(c),
        columns,
        rows,
        timing_note(c),
    )


def _apart(seconds: float | None) -> str:
    if seconds is None:
        return "start times unknown"
    minutes = seconds / 60
    return f"started {minutes:.0f} min apart" if minutes >= 1 else f"started {seconds:.0f} s apart"


def timing_reading(c: Comparison) -> str:
    """The timing headline. Only runs whose timings were taken side by side could attribute a change to the
    variant: for sequential runs (or runs of unknown order) the headline says that the change it reports may
    be machine drift, which the bootstrap interval does not cover; overlapping runs make the timings invalid."""
    ch = c.timing_changes.get("warm_prefill_ms")
    what = "warm prefill (server)"
    if ch is None:
        ch, what = c.timing_changes.get("warm_ttft_ms"), "warm TTFT (client)"
    if ch is None:
        return "No paired timing data: the timing change cannot be estimated."
    measured = f"{signed_pct(ch.estimate)}, {ch.ci_label} {signed_pct(ch.low)} to {signed_pct(ch.high)}, over {ch.n_inputs} inputs"
    if c.execution == "interleaved":
        drift = " Drift was flagged: see the warnings." if c.paired and c.paired.drifting else ""
        return (
            f"{_attributed_reading(c, ch, what)} Interleaved A/B (one lbeval ab session): the figure is paired "
            f"in time (adjacent requests), so it is free of machine drift up to the pairing.{drift}"
        )
    if c.execution == "overlapping":
        return (
            f"Base and variant ran at the same time and competed for the machine: the {what} change below "
            f"({measured}) is not valid; re-run them one at a time."
        )
    if c.execution in ("sequential", "unknown"):
        order = (
            f"Base and variant ran one after the other (sequential, {_apart(c.start_gap_s)})"
            if c.execution == "sequential"
            else "The runs' start and end times are unknown (they may not have run side by side)"
        )
        valid = c.base.scores.timing.valid and c.variant.scores.timing.valid
        tail = "" if valid else " Timing is flagged invalid (see the warnings)."
        if ch.low <= 0 <= ch.high:
            return f"{order}: no detectable change in {what} ({measured}, includes 0); drift is not in the interval.{tail}"
        return (
            f"{order}: the {what} change below ({measured}) may be machine drift, not the variant; "
            f"an interleaved A/B run is needed to attribute it.{tail}"
        )
    return _attributed_reading(c, ch, what)


def _attributed_reading(c: Comparison, ch: Change, what: str) -> str:
    """The headline of timings taken side by side: the change is the variant's."""
    if ch.high < 0:
        verdict = f"Variant {what} is {-ch.estimate:.1f}% lower than base ({ch.ci_label} {-ch.high:.1f}% to {-ch.low:.1f}% lower)"
    elif ch.low > 0:
        verdict = f"Variant {what} is {ch.estimate:.1f}% higher than base ({ch.ci_label} {ch.low:.1f}% to {ch.high:.1f}% higher)"
    else:
        verdict = (
            f"No detectable change in {what}: {signed_pct(ch.estimate)}, "
            f"{ch.ci_label} {signed_pct(ch.low)} to {signed_pct(ch.high)} includes 0"
        )
    valid = c.base.scores.timing.valid and c.variant.scores.timing.valid
    return (
        verdict
        + f", over {ch.n_inputs} inputs"
        + ("." if valid else "; timing is flagged invalid (see the warnings).")
    )


def timing_note(c: Comparison) -> str:
    a, b = c.base.scores.run, c.variant.scores.run
    note = (
        f"The interval is a paired bootstrap over inputs ({BOOTSTRAP_RESAMPLES:,} resamples, seed {c.seed}, "
        "all repetitions of an input kept together): it covers how much the change varies from input to "
        "input, not machine drift. "
    )
    if c.execution == "interleaved":
        note += (
            "The runs come from one interleaved lbeval ab session: the change is the paired-in-time figure of "
            "adjacent requests (see the interleaved A/B table), so slow machine drift cancels in each pair. "
        )
    elif c.execution == "sequential":
        note += (
            f"The runs were executed sequentially (base {a.started_at} to {a.ended_at}, variant "
            f"{b.started_at} to {b.ended_at}), so anything that made the machine slower or busier during "
            "one run shifts all its timings and is not in the interval. "
        )
    elif c.execution == "overlapping":
        note += "The runs overlapped in time, so they competed for the machine: these timings are not valid. "
    else:
        note += "The runs' start and end times are unknown, so their execution order cannot be checked. "
    note += (
        "Within each run, cold and warm timing requests were interleaved per input (concurrency 1), so the "
        "cold/warm contrast inside a run is protected from slow drift."
    )
    return note
