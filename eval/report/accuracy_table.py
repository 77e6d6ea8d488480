"""The accuracy table: each dataset's cold and warm score on both sides, whether the cold outputs are
identical, and the warm change with its interval; with its reading."""

from __future__ import annotations

from eval.analyze.accuracy_types import SECONDARY_ROUGE_METRICS, DatasetAccuracy
from eval.analyze.compare import Comparison
from eval.report.benchmark_tables import accuracy_notes
from eval.report.cells import Cell, Frac, Num, Row, Table, Text
from eval.report.columns import change_cell


def accuracy_table(c: Comparison) -> Table:
    base, var = c.base.scores, c.variant.scores
    acc_b = {a.dataset: a for a in base.accuracy}
    acc_v = {a.dataset: a for a in var.accuracy}
    cross = {x.dataset: x for x in c.cross}
    has_rouge = any(a.metric in SECONDARY_ROUGE_METRICS for a in base.accuracy)
    columns = [
        "dataset",
        "metric",
        "scored",
        "base cold",
        "variant cold",
        "cold outputs identical",
        "base warm",
        "variant warm",
        "warm change, pts [95% CI]",
    ]
    if has_rouge:
        columns += ["base cold ROUGE-L*", "variant cold ROUGE-L*"]
    rows = []
    for ds in base.datasets:
        b, v = acc_b[ds], acc_v.get(ds)
        cells: list[Cell] = [Text(b.metric), _scored(b, v)]
        cells += [_score(b, "cold"), _score(v, "cold"), Frac(cross[ds].text_equal, cross[ds].n_total)]
        cells += [_score(b, "warm"), _score(v, "warm"), change_cell(c.warm_changes.get(ds), "", 2)]
        if has_rouge:
            cells += [_rouge(b), _rouge(v)]
        rows.append(Row(ds, ds, cells))
    note = ""
    if has_rouge:
        note = (
            "* secondary column: ROUGE-L F-measure from Google's rouge-score package (the official "
            "score column uses the `rouge` package LongBench uses; the two give different numbers)."
        )
    note = " ".join([note, *accuracy_notes(base.accuracy)]).strip()  # each benchmark's own (its report.py)
    return Table(
        "accuracy", "Accuracy (official LongBench score, 0-100)", accuracy_reading(c), columns, rows, note
    )


def _score(acc: DatasetAccuracy | None, pass_name: str) -> Cell:
    ps = acc.passes.get(pass_name) if acc is not None else None
    return None if ps is None else Num(ps.score, 2)


def _rouge(acc: DatasetAccuracy | None) -> Cell:
    ps = acc.passes.get("cold") if acc is not None else None
    return None if ps is None else Num(ps.rouge_l, 2)


def _scored(*accs: DatasetAccuracy | None) -> Cell:
    """The fewest examples scored in any of the four score cells, of the dataset's inputs."""
    counts = [
        (ps.n_scored, ps.n_total)
        for acc in accs
        if acc is not None
        for p, ps in acc.passes.items()
        if p in ("cold", "warm")
    ]
    if not counts:
        return None
    return Frac(min(k for k, _ in counts), max(n for _, n in counts))


def accuracy_reading(c: Comparison) -> str:
    same = sum(x.text_equal for x in c.cross)
    total = sum(x.n_total for x in c.cross)
    diffs = []
    for b in c.base.scores.accuracy:
        v = next((a for a in c.variant.scores.accuracy if a.dataset == b.dataset), None)
        bs, vs = b.passes.get("cold"), v.passes.get("cold") if v else None
        if bs and vs and bs.score is not None and vs.score is not None:
            diffs.append(abs(vs.score - bs.score))
    text = f"Cold outputs are identical across the two variants on {same}/{total} inputs"
    if diffs:
        text += f"; cold scores differ by at most {max(diffs):.2f} points"
    changes = [ch for ch in c.warm_changes.values() if ch is not None]
    if changes:
        lo, hi = min(ch.low for ch in changes), max(ch.high for ch in changes)
        text += f"; every warm-score change CI lies within [{lo:+.2f}, {hi:+.2f}] points"
    return text + "."
