"""The attribution table (one row per cause of a difference) and its plots, from eval/analyze/attribution.py.

    run_attribution_table(scores)   one run: `lbeval score` (scores.md)
    attribution_table(c)            base and variant side by side: `lbeval compare` (report.md, summary.json,
                                    report.html, as table 5)
    attribution_plots(c)            report.html: each scenario's plots (eval/report/scenario_plots/<name>.py:
                                    batch by batch size, hitlen by hit length), in the registry's order

The reading line states confounding, never hides it: cache pairs measured at concurrency C > 1 are marked
"confounded with batch composition", and the reading names the batch scenario's result at batch size C (no
effect there: the cache figures stand; an effect: they cannot be attributed; not measured: says so).
"""

from __future__ import annotations

import math

from eval.analyze import attribution as at
from eval.analyze.agreement import NEAR_TIE_MARGIN
from eval.analyze.attribution import Attribution, AttributionRow, Confounding, Pointer, pointed_cause
from eval.analyze.compare import Comparison
from eval.analyze.score import RunScores
from eval.records import scenarios as sc
from eval.records.scenario_kinds.parts import import_scenario_modules
from eval.report.cells import Blank, Cell, Frac, Ints, Num, Row, Sci, Table, Text
from eval.report.scenario_plots.kit import plots_of

MAX_POSITIONS = 12
SUB_INDENT = "· "

# measure -> column name (each measure is one column for a run, two (base, variant) for a comparison)
MEASURES = (
    ("text", "equal outputs (text)"),
    ("tokens", "token IDs equal"),
    ("positions", f"first divergence positions (first {MAX_POSITIONS})"),
    ("near_ties", f"divergences at a near tie (margin < {NEAR_TIE_MARGIN})"),
    ("max_delta", "max |top-k logprob delta|"),
    ("min_overlap", "min top-k overlap"),
    ("multiple", "inputs with more than one distinct output"),
    ("max_distinct", "most distinct outputs of one input"),
    ("hits", "primed hits honoured"),
    ("confounded", "confounded with"),
)
NOTE = (
    "Each row compares pairs of outputs of the same input that differ only in what the row varies; N counts "
    "every planned pair (errored, invalid and missing samples included, never equal). Top-k deltas and "
    "overlaps are taken over the positions up to the first divergence. Hits honoured: primed requests whose "
    "cached tokens equal floor(min(L, n-1)/block)*block. Indented rows are one value of what their cause row "
    "varies. A cause row marked 'not run' names a scenario the run did not include (lbeval run --scenarios)."
)


def row_label(r: AttributionRow) -> str:
    if r.level:
        return SUB_INDENT + r.condition
    return f"{r.cause} ({r.condition})"


def measure_cell(r: AttributionRow | None, measure: str) -> Cell:
    if r is None:
        return Blank()
    if not r.measured:
        return Text("not run") if measure == "text" else None
    s, o = r.pairs, r.outputs
    if measure == "text":
        return None if s is None else Frac(s.text_equal, s.n_total)
    if measure == "tokens":
        return None if s is None else Frac(s.tokens_equal, s.n_total)
    if measure == "positions":
        return None if s is None else Ints(tuple(sorted(d.position for d in s.divergences))[:MAX_POSITIONS])
    if measure == "near_ties":
        return None if s is None else Frac(sum(d.near_tie for d in s.divergences), len(s.divergences))
    if measure == "max_delta":
        return None if s is None else Sci(s.max_delta)
    if measure == "min_overlap":
        return None if s is None or s.min_overlap is None else Num(s.min_overlap, 0)
    if measure == "multiple":
        return None if o is None else Frac(o.n_multiple, o.n_inputs)
    if measure == "max_distinct":
        return None if o is None else Num(o.max_distinct, 0)
    if measure == "hits":
        return Blank() if r.hits is None else Frac(r.hits.honoured, r.hits.total)
    return Text(r.confounded_with) if r.confounded_with else Blank()


def _fixed_varied(r: AttributionRow) -> list[Cell]:
    return [Blank(), Blank()] if r.level else [Text(r.held_fixed), Text(r.varied)]


# ---------------------------------------------------------------- one run


def run_attribution_table(scores: RunScores) -> Table | None:
    return None if scores.attribution is None else one_run_table(scores.attribution)


def one_run_table(a: Attribution) -> Table:
    """One row per attribution row of the run, in its order (every registered scenario's)."""
    rows = [
        Row(r.key, row_label(r), [*_fixed_varied(r), *(measure_cell(r, m) for m, _ in MEASURES)])
        for r in a.rows
    ]
    columns = ["cause (compared)", "held fixed", "varied", *(name for _, name in MEASURES)]
    return Table(
        "attribution", "Attribution: what caused each difference", reading(a), columns, rows, note(a)
    )


# ---------------------------------------------------------------- a comparison


def _merged_keys(a: Attribution | None, b: Attribution | None) -> list[str]:
    """Row keys of both sides: the first side's order, each key only the second has placed after the key that
    precedes it there (a variant's extra batch size next to the base's)."""
    keys = [r.key for r in a.rows] if a is not None else []
    previous: str | None = None
    for r in b.rows if b is not None else []:
        if r.key not in keys:
            keys.insert(keys.index(previous) + 1 if previous in keys else len(keys), r.key)
        previous = r.key
    return keys


def _compare_label(rb: AttributionRow | None, rv: AttributionRow | None) -> str:
    measured = [(side, r) for side, r in (("base", rb), ("variant", rv)) if r is not None and r.measured]
    shown = measured[0][1] if measured else (rb or rv)
    assert shown is not None
    conditions = list(dict.fromkeys(r.condition for _, r in measured))
    if len(conditions) < 2:
        return row_label(shown)
    both = "; ".join(f"{side}: {r.condition}" for side, r in measured)
    return SUB_INDENT + both if shown.level else f"{shown.cause} ({both})"


def attribution_table(c: Comparison) -> Table:
    base, var = c.base.scores.attribution, c.variant.scores.attribution
    rows = []
    for key in _merged_keys(base, var):
        rb = base.row(key) if base is not None else None
        rv = var.row(key) if var is not None else None
        shown = rb if rb is not None and (rb.measured or rv is None or not rv.measured) else rv
        assert shown is not None
        cells: list[Cell] = _fixed_varied(shown)
        for measure, _ in MEASURES:
            cells += [measure_cell(rb, measure), measure_cell(rv, measure)]
        rows.append(Row(key, _compare_label(rb, rv), cells))
    columns = ["cause (compared)", "held fixed", "varied"]
    for _, name in MEASURES:
        columns += [f"base {name}", f"variant {name}"]
    parts = [f"{side}: {reading(att)}" for side, att in (("Base", base), ("Variant", var)) if att is not None]
    text = " ".join(parts) if parts else "No attribution data."
    notes = " ".join(dict.fromkeys(note(att) for att in (base, var) if att is not None))
    return Table("attribution", "Attribution: what caused each difference", text, columns, rows, notes)


# ---------------------------------------------------------------- reading


def _delta(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return "0" if value == 0 else f"{value:.3g}"


def _no_effect(r: AttributionRow) -> bool:
    s = r.pairs
    return s is not None and s.n_total > 0 and s.tokens_equal == s.n_total and not s.max_delta


def _finding(r: AttributionRow) -> str:
    s = r.pairs
    assert s is not None
    text = f"{r.cause} ({r.condition}) {s.text_equal}/{s.n_total} equal, max |delta| {_delta(s.max_delta)}"
    if r.hits is not None:
        text += f", hits honoured {r.hits.honoured}/{r.hits.total}"
    return text


def confounding_reading(k: Confounding) -> str:
    head = (
        f"The cache pairs were measured at concurrency {k.concurrency}, with other units in flight, so they are "
        f"confounded with batch composition: "
    )
    if not k.measured_sizes:
        return head + (
            f"the batch scenario was not run (lbeval run --scenarios cache,batch --batch-sizes 1,{k.concurrency} "
            "isolates it), so the cache figures cannot be attributed to the prefix cache."
        )
    r = k.batch_row
    if r is None or r.pairs is None:
        sizes = ", ".join(str(b) for b in k.measured_sizes)
        return head + (
            f"the batch scenario measured batch sizes {sizes}, not {k.concurrency}, so the cache figures cannot be "
            "attributed to the prefix cache."
        )
    s = r.pairs
    measured = (
        f"batch of {k.concurrency}: {s.text_equal}/{s.n_total} equal, max |delta| {_delta(s.max_delta)}"
    )
    if _no_effect(r):
        return head + f"{measured}, so batching shows no effect at that size and the cache figures stand."
    return head + f"{measured}: the cache figures cannot be attributed to the prefix cache."


def reading(a: Attribution) -> str:
    causes = [r for r in a.rows if r.level == 0]
    measured = [r for r in causes if r.measured and r.pairs is not None]
    effects = [
        r for r in measured if not _no_effect(r) or (r.hits is not None and r.hits.honoured < r.hits.total)
    ]
    quiet = [r for r in measured if r not in effects]
    parts = []
    if effects:
        parts.append("Differences: " + "; ".join(_finding(r) for r in effects) + ".")
    if quiet:
        names = ", ".join(f"{r.cause} {r.pairs.text_equal}/{r.pairs.n_total}" for r in quiet if r.pairs)
        parts.append(f"No effect (bit-identical): {names}.")
    if not measured:
        parts.append("No cause was measured.")
    missing = list(dict.fromkeys(r.scenario for r in causes if not r.measured))
    if missing:
        parts.append(f"Not run: {', '.join(missing)}.")
    if a.confounding is not None:
        parts.append(confounding_reading(a.confounding))
    if measured:
        parts.append(pointer_reading(pointed_cause(a)))
    return " ".join(parts)


def _k_of_n(r: AttributionRow) -> str:
    s = r.pairs
    return f"{r.scenario if r.level == 0 else r.value} {s.text_equal}/{s.n_total}" if s else r.key


# what each kind of pointer says (eval/analyze/attribution.py POINT_*)
POINTER_TEXT = {
    at.POINT_NONE: "no cause shows a difference",
    at.POINT_NOISE: "run-to-run variation: the very same request differs, so the other differences may be "
    "that noise",
    at.POINT_PARTIAL: "differences only where a partial prefix was resumed",
    at.POINT_HITLEN: "differences only in the prefix-hit lengths, not in the cache scenario's warm path",
    at.POINT_WARM: "differences where a request starts from a prefix hit (the warm path)",
    at.POINT_BATCH: "differences with batch composition",
    at.POINT_TRAFFIC: "differences after unrelated traffic, not before it",
    at.POINT_REPLICA: "differences between replicas: the same request on another replica of the variant",
    at.POINT_CAUSE: "differences in one cause only",
    at.POINT_SEVERAL: "differences in several causes, no single one",
}


def pointer_reading(p: Pointer) -> str:
    """The reading's last sentence: the cause the rows point at, its evidence (row k/N equal), what is clean,
    e.g. "Points at: differences only where a partial prefix was resumed: hitlen 20/44 (1B 0/4); cache,
    batch, repeats clean." """
    text = "Points at: " + POINTER_TEXT[p.kind]
    evidence = ", ".join(_k_of_n(r) for r in p.differing)
    if evidence:
        text += f": {evidence}"
    if p.sub_rows:
        text += f" ({', '.join(_k_of_n(r) for r in p.sub_rows)})"
    if p.clean:
        text += f"{'; ' if evidence else ': '}{', '.join(p.clean)} clean"
    return text + "."


def note(a: Attribution) -> str:
    subset = ""
    if a.scenario_inputs < a.n_inputs and any(s != "cache" for s in a.scenarios):
        subset = (
            f" The scenarios other than cache ran on {a.scenario_inputs} of the {a.n_inputs} inputs "
            "(--scenario-inputs), taken in turn from each dataset."
        )
    return NOTE + subset + replicas_note(a)


def replicas_note(a: Attribution) -> str:
    """The one line a run on replicas adds: which pairs may cross replicas (none but the replica row's)."""
    if a.replicas < 2:
        return ""
    return (
        f" This run ran on {a.replicas} replicas: every pair but the replica row's compares two records of one "
        "replica (cold_warm_equality and the other pair rules included); a pair across replicas is counted "
        "invalid, never compared."
    )


# ---------------------------------------------------------------- plots

# the plot module of every registered scenario that has one (eval/report/scenario_plots/<name>.py)
PLOT_MODULES = import_scenario_modules("eval.report.scenario_plots")


def attribution_plots(c: Comparison) -> list[str]:
    """Each scenario's plots, in the registry's order (only for what either run measured)."""
    return [svg for name in sc.SCENARIOS for svg in plots_of(name)(c)]
