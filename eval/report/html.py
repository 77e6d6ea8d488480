"""`report.html`: one self-contained file (inline CSS and SVG; no script, no external resource).

Sections: run identities and warnings, the four tables (the same cells as report.md), plots (per-input
warm timing with CIs, divergence positions, top-k logprob delta distribution) and a drill-down of every
diverging pair, both outputs side by side with the first differing token highlighted.

Every piece of data (model outputs above all) is escaped with `html.escape(..., quote=True)`, and its control
characters are shown as visible escapes (`eval.terminal.inert`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

from eval.analyze.compare import Comparison, DivergentPair, divergence_list
from eval.analyze.score import ScoredRun
from eval.gate.verdict import Verdict
from eval.records.types import RequestRecord
from eval.report.attribution import attribution_plots
from eval.report.banner import Banner, banner, failed_rows, table_marks
from eval.report.cells import Table, cell_text
from eval.report.format import first_char_difference, fmt3
from eval.report.svg import Point, Series, StripPoint, errorbar_plot, grouped_bars, strip_plot
from eval.terminal import inert

MAX_DRILLDOWN_PAIRS = 200
OPEN_DETAILS = 5  # the first diverging examples are shown expanded
BASE_COLOR, VARIANT_COLOR, CROSS_COLOR = "#1f77b4", "#d62728", "#7f7f7f"
DELTA_BINS = [
    (0.0, "0"),
    (1e-6, "≤1e-6"),
    (1e-5, "≤1e-5"),
    (1e-4, "≤1e-4"),
    (1e-3, "≤1e-3"),
    (1e-2, "≤0.01"),
    (1e-1, "≤0.1"),
    (1.0, "≤1"),
    (float("inf"), ">1"),
]

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1200px;
color:#222;padding:0 16px;line-height:1.4}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:.9em;display:block;overflow-x:auto;max-width:100%}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right;vertical-align:top}
th:first-child,td:first-child{text-align:left}th{background:#f3f3f3}
.reading{font-weight:600}.note{color:#555;font-size:.9em;max-width:100ch}
.warn{background:#fff4e5;border-left:4px solid #f0a020;padding:6px 12px}
.plot{max-width:1000px;display:block;margin:12px 0}.plot-title{font-weight:600;font-size:14px}
.plot-legend,.tick{font-size:11px;fill:#333}.axis{font-size:12px;fill:#333}.grid{stroke:#e5e5e5}
details{border:1px solid #ddd;margin:6px 0;padding:4px 8px}summary{cursor:pointer}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:8px}
.pair pre{white-space:pre-wrap;word-break:break-word;background:#fafafa;border:1px solid #eee;padding:6px;
margin:4px 0;max-height:420px;overflow:auto;font-size:.85em}
mark{background:#ffd54f;outline:1px solid #e65100}.meta{color:#555;font-size:.85em}
.banner{border:2px solid #888;border-left-width:10px;padding:4px 14px;margin:12px 0;background:#fafafa}
.banner h2{border:none;margin:.3em 0}.banner.pass{border-color:#2e7d32;background:#f1f8f1}
.banner.fail{border-color:#c62828;background:#fdf1f1}.banner.no-verdict{border-color:#ef8f00;background:#fff8ec}
.banner td,.banner th{text-align:left}td.st-fail{color:#c62828;font-weight:700}td.st-pass{color:#2e7d32}
tr.failed td{background:#fde2e2}.failtag{color:#c62828;font-weight:700;margin-left:.3em;white-space:nowrap}
.toc{font-size:.9em;line-height:1.8;border-bottom:1px solid #ddd;padding-bottom:6px}.toc a{color:#1a4f8b}
.dot-label{font-size:9px;fill:#444}
.ctl{color:#b71c1c;background:#ffebee;border-radius:2px}
"""


def _ctl(esc: str) -> str:
    return f'<span class="ctl">{esc}</span>'


def _e(text: object) -> str:
    """Escaped text; control characters (terminal escapes in a model output) shown as styled `\\x1b`."""
    return inert(escape(str(text).replace("\r\n", "\n"), quote=True), mark=_ctl)


def html_report(c: Comparison, tables: Sequence[Table], verdict: Verdict | None = None) -> str:
    b, v = c.base.scores.run, c.variant.scores.run
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>lbeval: {_e(b.variant)} vs {_e(v.variant)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>lbeval: {_e(b.variant)} vs {_e(v.variant)}</h1>",
        toc_html(tables, bool(c.warnings)),
        _identity(c),
        banner_html(banner(verdict)),
    ]
    if c.warnings:
        parts.append('<div class="warn" id="warnings"><strong>Warnings</strong><ul>')
        parts += [f"<li>{_e(w)}</li>" for w in c.warnings]
        parts.append("</ul></div>")
    marks = failed_rows(verdict)
    for i, table in enumerate(tables, start=1):
        parts.append(render_table(table, i, table_marks(marks, table.id)))
    parts.append('<h2 id="plots">Plots</h2>')
    parts += [timing_plot(c), divergence_plot(c), delta_plot(c), *attribution_plots(c)]
    parts.append(drilldown(c))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def toc_html(tables: Sequence[Table], warnings: bool) -> str:
    """The table of contents: a link to the verdict, the warnings, each table, the plots and the drill-down."""
    entries = [("verdict", "Gate verdict")] + ([("warnings", "Warnings")] if warnings else [])
    entries += [(t.id, f"{i}. {t.title}") for i, t in enumerate(tables, start=1)]
    entries += [("plots", "Plots"), ("divergences", "Diverging outputs")]
    links = " · ".join(f'<a href="#{_e(anchor)}">{_e(text)}</a>' for anchor, text in entries)
    return f'<nav class="toc"><strong>Contents</strong>: {links}</nav>'


def _identity(c: Comparison) -> str:
    rows = []
    for side, run in (("base", c.base), ("variant", c.variant)):
        r = run.scores.run
        rows.append(
            f"<tr><td>{side}</td><td>{_e(r.variant)}</td><td>{_e(r.run_id)}</td><td>{_e(r.model)}</td>"
            f"<td>{_e(r.started_at or 'n/a')}</td><td>{_e(r.ended_at or 'n/a')}</td>"
            f"<td>{'yes' if r.complete else 'no'}</td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("", "variant", "run", "model", "started", "ended", "complete"))
    s = c.base.scores
    return (
        f"<table><tr>{head}</tr>{''.join(rows)}</table>"
        f'<p class="meta">{s.n_inputs} inputs ({_e(", ".join(s.datasets))}); inputs sha256 '
        f"{_e(s.run.inputs_sha256)}; execution: {_e(c.execution)}</p>"
    )


BANNER_CLASS = {"PASS": "pass", "FAIL": "fail", "NO VERDICT": "no-verdict"}


def banner_html(b: Banner) -> str:
    """The verdict banner: outcome, each checked rule with its measured value and threshold, skipped rules."""
    parts = [
        f'<section class="banner {BANNER_CLASS.get(b.outcome, "")}" id="verdict">',
        f"<h2>Gate verdict: {_e(b.outcome)}</h2><p><strong>{_e(b.headline)}</strong></p>",
    ]
    if b.reasons:
        parts.append("<p>Why there is no verdict:</p><ul>" + "".join(f"<li>{_e(r)}</li>" for r in b.reasons))
        parts.append("</ul>")
    if b.checked:
        rows = "".join(
            f'<tr><td class="st-{_e(r.status.replace(" ", "-"))}">{_e(r.status.upper())}</td>'
            f"<td>{_e(r.rule)}</td><td>{_e(r.measured + (f' ({r.detail})' if r.detail else ''))}</td>"
            f"<td>{_e(r.threshold)}</td></tr>"
            for r in b.checked
        )
        head = "<tr><th>result</th><th>rule</th><th>measured</th><th>threshold</th></tr>"
        parts.append(f"<table>{head}{rows}</table>")
    if b.skipped:
        skipped = "; ".join(f"{r.rule} ({r.threshold})" for r in b.skipped)
        parts.append(f'<p class="note">Skipped: {_e(skipped)}.</p>')
    if b.policy:
        parts.append(f'<p class="note">Policy: {_e(b.policy)}. Rows a rule fails are marked ✗ below.</p>')
    return "".join(parts) + "</section>"


def _row_html(table: Table, key: str, label: str, cells: str, failing: Sequence[str] | None) -> str:
    if not failing:
        return f'<tr id="{_e(table.id)}-{_e(key)}"><td>{_e(label)}</td>{cells}</tr>'
    tag = f'<span class="failtag">✗ fails {_e(", ".join(failing))}</span>'
    return f'<tr id="{_e(table.id)}-{_e(key)}" class="failed"><td>{_e(label)} {tag}</td>{cells}</tr>'


def render_table(table: Table, number: int, marks: Mapping[str, Sequence[str]] | None = None) -> str:
    """A table; the rows in `marks` (row key -> failing rules) are highlighted with the rules they fail."""
    marks = marks or {}
    head = "".join(f"<th>{_e(col)}</th>" for col in table.columns)
    body = "".join(
        _row_html(
            table,
            r.key,
            r.label,
            "".join(f"<td>{_e(cell_text(cell))}</td>" for cell in r.cells),
            marks.get(r.key),
        )
        for r in table.rows
    )
    note = f'<p class="note">{_e(table.note)}</p>' if table.note else ""
    return (
        f'<h2 id="{_e(table.id)}">{number}. {_e(table.title)}</h2><p class="reading">{_e(table.reading)}</p>'
        f"<table><tr>{head}</tr>{body}</table>{note}"
    )


# ---------------------------------------------------------------- plots


def timing_plot(c: Comparison) -> str:
    """One panel per dataset (each its own scale: a long-output dataset does not squash the others); times
    cannot be negative, so the axis starts at 0 and an interval reaching below it is clipped (dashed)."""
    measure, what = "warm_prefill_ms", "warm prefill, server"
    if not any(t.measures[measure] for t in c.base.scores.timing.per_input):
        measure, what = "warm_ttft_ms", "warm TTFT, client"
    panels = []
    for dataset in c.base.scores.datasets:
        keys = [k for k in c.base.keys if k[0] == dataset]
        series = [
            Series(f"{side} ({run.scores.run.variant})", color, _timing_points(run, measure, keys))
            for side, run, color in (("base", c.base, BASE_COLOR), ("variant", c.variant, VARIANT_COLOR))
        ]
        title = (
            f"Per-input {what} (ms), {dataset}: mean and 95% t-interval over the repetitions (clipped at 0)"
        )
        panels.append(errorbar_plot([k[1][:8] for k in keys], series, "ms", title, height=300, floor=0.0))
    return "\n".join(panels)


def _timing_points(run: ScoredRun, measure: str, keys: Sequence[tuple[str, str]]) -> list[Point | None]:
    by_key = {(t.dataset, t.example_id): t.measures[measure] for t in run.scores.timing.per_input}
    points: list[Point | None] = []
    for key in keys:
        s = by_key.get(key)
        points.append(None if s is None else Point(s.mean, s.ci_low, s.ci_high))
    return points


def divergence_plot(c: Comparison) -> str:
    """A dot per diverging pair at its first differing token, labelled with the input's id (first 8
    characters; the drill-down below lists each input in full)."""
    rows: list[tuple[str, str, Sequence[StripPoint]]] = []
    for side, run, color in (("base", c.base, BASE_COLOR), ("variant", c.variant, VARIANT_COLOR)):
        for name in ("cold_warm", "warm_repeat"):
            s = run.scores.agreement.get(name)
            if s is not None:
                points = [(d.position, d.example_id[:8]) for d in s.divergences]
                rows.append((f"{side} {s.pass_a}/{s.pass_b}", color, points))
    cross = [
        (int(p.result.first_divergence), p.key[1][:8])
        for x in c.cross
        for p in x.pairs
        if p.result.first_divergence is not None
    ]
    rows.append(("cold base/variant", CROSS_COLOR, cross))
    title = "Where outputs diverge (each dot labelled with its input's id)"
    return strip_plot(rows, "token position of the first divergence", title)


def delta_counts(values: Sequence[float | None]) -> list[int]:
    counts = [0] * len(DELTA_BINS)
    for value in values:
        if value is None or math.isnan(value):
            continue
        index = next(i for i, (edge, _) in enumerate(DELTA_BINS) if value <= edge)
        counts[index] += 1
    return counts


def delta_plot(c: Comparison) -> str:
    series = []
    for name, label in (("cold_warm", "cold/warm outputs"), ("timing_first_token", "first token")):
        for side, run, color in (("base", c.base, BASE_COLOR), ("variant", c.variant, VARIANT_COLOR)):
            pairs = run.pairs.get(name, [])
            shade = color if name == "cold_warm" else color + "88"
            series.append(
                (f"{side} {label}", shade, delta_counts([p.result.topk_max_abs_delta for p in pairs]))
            )
    cross = [p.result.topk_max_abs_delta for x in c.cross for p in x.pairs]
    series.append(("base/variant cold outputs", CROSS_COLOR, delta_counts(cross)))
    bins = [label for _, label in DELTA_BINS]
    title = "Max |top-k logprob delta| per pair (positions up to the first divergence)"
    return grouped_bars(bins, series, "max |logprob delta| (nats)", "pairs", title)


# ---------------------------------------------------------------- drill-down


def highlighted(text: str, at: int) -> str:
    """Escaped text with the word containing character `at` wrapped in <mark> (nothing if at == len)."""
    if at >= len(text):
        return _e(text) + ("<mark>⟨end⟩</mark>" if text else "<mark>⟨empty⟩</mark>")
    start = at
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    end = at + 1
    while end < len(text) and not text[end].isspace():
        end += 1
    return f"{_e(text[:start])}<mark>{_e(text[start:end])}</mark>{_e(text[end:])}"


def _token_at(rec: RequestRecord | None, pos: int) -> str:
    ids = rec.output_token_ids if rec is not None else None
    if ids is None:
        return "n/a"
    return str(ids[pos]) if pos < len(ids) else "end"


def pair_html(dp: DivergentPair) -> str:
    a, b = dp.a, dp.b
    ta, tb = a.output_text or "", b.output_text or ""
    d = dp.divergence
    at = first_char_difference(ta, tb)
    margins = " / ".join(fmt3(m) for m in (d.margin_a, d.margin_b))
    meta = (
        f'<p class="meta"><strong>{_e(dp.kind)}</strong>'
        + (f" (timing repetition {dp.repetition})" if dp.repetition else "")
        + f": first differing token #{d.position} (id {_e(_token_at(a, d.position))} vs "
        f"{_e(_token_at(b, d.position))}); top-1/top-2 margins {_e(margins)}"
        + (" <strong>near tie</strong>" if d.near_tie else "")
        + ("; the texts are equal, only the token IDs differ" if ta == tb else "")
        + "</p>"
    )
    cols = "".join(
        f'<div><div class="meta">{_e(label)}</div><pre>{highlighted(text, at) if ta != tb else _e(text)}</pre></div>'
        for label, text in ((dp.a_label, ta), (dp.b_label, tb))
    )
    return meta + f'<div class="pair">{cols}</div>'


def drilldown(c: Comparison) -> str:
    found = divergence_list(c)
    parts = [f'<h2 id="divergences">Diverging outputs ({len(found)})</h2>']
    if not found:
        return parts[0] + "<p>No pair of outputs diverged.</p>"
    parts.append(
        '<p class="note">Each diverging example, both outputs side by side; the word holding the '
        "first differing character is highlighted. Token positions count generated tokens from 0.</p>"
    )
    groups: dict[tuple[str, str], list[DivergentPair]] = {}
    for dp in found[:MAX_DRILLDOWN_PAIRS]:
        groups.setdefault((dp.dataset, dp.example_id), []).append(dp)
    for i, ((ds, ex), dps) in enumerate(groups.items()):
        kinds = ", ".join(f"{dp.kind} @ token {dp.divergence.position}" for dp in dps)
        opened = " open" if i < OPEN_DETAILS else ""
        parts.append(f"<details{opened}><summary>{_e(ds)} / {_e(ex)}: {_e(kinds)}</summary>")
        parts += [pair_html(dp) for dp in dps]
        parts.append("</details>")
    if len(found) > MAX_DRILLDOWN_PAIRS:
        parts.append(f"<p>… and {len(found) - MAX_DRILLDOWN_PAIRS} more pairs (listed in summary.json).</p>")
    return "\n".join(parts)
