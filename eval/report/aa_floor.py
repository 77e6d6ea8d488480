"""The A/A floor table (`--aa-floor RUN_A RUN_B`): per timing measure, the compared change [95% CI] beside what
an A/A session of one configuration showed (its gated change [97.5% CI] and the floor, max |CI end|), and where
the change lies against the floor."""

from __future__ import annotations

from eval.analyze.aa_floor import AaFloor, AaMeasure, position
from eval.analyze.compare import Change, Comparison
from eval.report.ab_timing_table import PAIRED_ROWS  # the same measures, named the same way
from eval.report.cells import Cell, Interval, Num, Row, Table, Text
from scorers.stats import signed_pct


def _where(ch: Change | None, m: AaMeasure | None) -> str:
    if ch is None or m is None or m.floor_pct is None:
        return "no data"
    return position(ch.low, ch.high, m.floor_pct)


def _aa_interval(m: AaMeasure | None) -> Interval | None:
    if m is None or m.estimate is None or m.ci_low is None or m.ci_high is None:
        return None
    return Interval(m.estimate, m.ci_low, m.ci_high, 1, "%")


def _cells(ch: Change | None, m: AaMeasure | None) -> list[Cell]:
    drift = ("DRIFT" if m.paired_drift else "none") if m is not None and m.reading else "not checked"
    return [
        Interval(ch.estimate, ch.low, ch.high, 1, "%") if ch is not None else None,
        _aa_interval(m),
        Num(m.floor_pct if m is not None else None, 1, "%"),
        Num(m.n_pairs if m is not None else None, 0),
        Text(drift),
        Text(_where(ch, m)),
    ]


def _reading(c: Comparison, aa: AaFloor) -> str:
    head = (
        f"A/A floor from {aa.runs[0]} and {aa.runs[1]} (lbeval ab {aa.variant} {aa.variant}, "
        f"{aa.adjacent} of {aa.pairs} pairs adjacent)"
    )
    ch, m = c.timing_changes.get("warm_prefill_ms"), aa.measures.get("warm_prefill_ms")
    if ch is None or m is None or m.floor_pct is None:
        return f"{head}: no warm prefill change or floor to set side by side."
    where = position(ch.low, ch.high, m.floor_pct)
    return (
        f"{head}: warm prefill change {signed_pct(ch.estimate)} [{ch.ci_label} {signed_pct(ch.low)}, {signed_pct(ch.high)}] against "
        f"an A/A floor of +-{m.floor_pct:.1f}%: {where}."
    )


def _note(c: Comparison) -> str:
    note = (
        "A/A: the same configuration on both sides of one lbeval ab session (one variant name, the same model, "
        "inputs, settings and server facts). Its paired change should be 0; the floor is the largest |end| of "
        "its gated interval (trimmed mean, Yuen 97.5% CI: the one the timing rules read), what two identical "
        "configurations show on this machine. 'beyond the floor': the change's "
        "whole CI lies outside +-floor; 'within': wholly inside; 'overlaps': across its edge (undecided)."
    )
    if c.execution != "interleaved":
        note += (
            " The compared runs are not one lbeval ab session: their change also holds machine drift between "
            "the runs, which an interleaved A/A floor does not measure."
        )
    return note


def aa_floor_table(c: Comparison) -> Table | None:
    aa = c.aa_floor
    if aa is None:
        return None
    rows = [Row(k, label, _cells(c.timing_changes.get(k), aa.measures.get(k))) for k, label in PAIRED_ROWS]
    level = next((ch.ci_label for ch in c.timing_changes.values() if ch is not None), "95% CI")
    columns = ["measure", f"change [{level}]", "A/A change [97.5% CI]", "A/A floor", "A/A pairs", "A/A paired drift",
               "change vs floor"]  # fmt: skip
    return Table("aa_floor", "Timing change against the A/A floor", _reading(c, aa), columns, rows, _note(c))
