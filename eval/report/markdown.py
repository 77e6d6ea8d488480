"""Markdown reports: `report.md` of a comparison (ready to paste into a PR) and a run's `scores.md`.

Everything that comes from data (model outputs, ids, variant names, warnings) goes through `md_escape`,
which makes it inert in GitHub-flavoured Markdown: no HTML (`<`, `>`, `&` become entities), no
emphasis, code spans or links, no table breaks (`|` is escaped, newlines become spaces), and control
characters shown as visible escapes (`\\x1b`, eval.terminal.inert).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from eval.analyze.agreement import NEAR_TIE_MARGIN
from eval.analyze.compare import Comparison, DivergentPair, divergence_list
from eval.analyze.score import RunScores
from eval.gate.verdict import FAIL, Verdict
from eval.report.attribution import run_attribution_table
from eval.report.banner import Banner, banner, failed_rows, table_marks
from eval.report.benchmark_tables import run_tables
from eval.report.cells import Table, cell_text
from eval.report.format import first_char_difference, fmt3
from eval.terminal import inert

MD_DIVERGENCES_SHOWN = 30
EXCERPT_BEFORE, EXCERPT_AFTER = 24, 40

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BACKSLASHED = set("\\`*_[]|~!#$")
_SEPARATORS = re.compile(r"[\u2028\u2029]")


def md_escape(text: str) -> str:
    """Inert inline Markdown for arbitrary text (one line; safe inside a table cell)."""
    text = inert(_SEPARATORS.sub("\ufffd", text.replace("\r\n", "\n").replace("\r", "\n")))
    out = []
    for ch in text:
        if ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ch in _BACKSLASHED:
            out.append("\\" + ch)
        elif ch in "\n\r\t":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def md_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Cells must already be escaped."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _label(label: str, failing: Sequence[str] | None) -> str:
    if not failing:
        return md_escape(label)
    return f"**✗ {md_escape(label)}** (fails {md_escape(', '.join(failing))})"


def render_table(table: Table, number: int, marks: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """A table; the rows in `marks` (row key -> failing rules) are marked ✗ with the rules they fail."""
    marks = marks or {}
    lines = [f"### {number}. {md_escape(table.title)}", "", md_escape(table.reading), ""]
    rows = [
        [_label(r.label, marks.get(r.key)), *(md_escape(cell_text(c)) for c in r.cells)] for r in table.rows
    ]
    lines += md_table([md_escape(c) for c in table.columns], rows)
    if table.note:
        lines += ["", md_escape(table.note)]
    return lines + [""]


def banner_markdown(b: Banner) -> list[str]:
    """The verdict banner: outcome, each checked rule with its measured value and threshold, skipped rules."""
    lines = [f"### Gate verdict: {b.outcome}", "", f"**{md_escape(b.headline)}**", ""]
    if b.reasons:
        lines += ["Why there is no verdict:", ""] + [f"- {md_escape(r)}" for r in b.reasons] + [""]
    if b.checked:
        rows = [
            [
                f"**{r.status.upper()}**" if r.status == FAIL else r.status.upper(),
                md_escape(r.rule),
                md_escape(r.measured + (f" ({r.detail})" if r.detail else "")),
                md_escape(r.threshold),
            ]
            for r in b.checked
        ]
        lines += md_table(["result", "rule", "measured", "threshold"], rows) + [""]
    if b.skipped:
        skipped = "; ".join(f"{r.rule} ({r.threshold})" for r in b.skipped)
        lines += [f"Skipped: {md_escape(skipped)}.", ""]
    if b.policy:
        lines += [f"Policy: {md_escape(b.policy)}. Rows a rule fails are marked ✗ in the tables below.", ""]
    return lines


def comparison_markdown(c: Comparison, tables: Sequence[Table], verdict: Verdict | None = None) -> str:
    b, v = c.base.scores.run, c.variant.scores.run
    lines = [
        f"## lbeval: {md_escape(b.variant)} vs {md_escape(v.variant)}",
        "",
        f"- base: {md_escape(b.variant)} run {md_escape(b.run_id)}, variant: {md_escape(v.variant)} run "
        f"{md_escape(v.run_id)}; model {md_escape(b.model)}; {c.base.scores.n_inputs} inputs "
        f"({md_escape(', '.join(c.base.scores.datasets))}); inputs sha256 {md_escape(b.inputs_sha256[:12])}",
        "",
    ]
    lines += banner_markdown(banner(verdict))
    if c.warnings:
        lines += ["**Warnings**", ""] + [f"- {md_escape(w)}" for w in c.warnings] + [""]
    marks = failed_rows(verdict)
    for i, table in enumerate(tables, start=1):
        lines += render_table(table, i, table_marks(marks, table.id))
    lines += divergences_markdown(c)
    return "\n".join(lines).rstrip() + "\n"


def excerpt(text: str, at: int) -> str:
    start = max(0, at - EXCERPT_BEFORE)
    end = min(len(text), at + EXCERPT_AFTER)
    return (
        ("…" if start else "") + text[start:at] + "⟦" + text[at:end] + ("…" if end < len(text) else "") + "⟧"
    )


def _margins(dp: DivergentPair) -> str:
    d = dp.divergence
    parts = [fmt3(m) for m in (d.margin_a, d.margin_b)]
    tie = " (near tie)" if d.near_tie else ""
    return f"{parts[0]} / {parts[1]}{tie}"


def divergences_markdown(c: Comparison) -> list[str]:
    found = divergence_list(c)
    lines = [f"### Diverging outputs ({len(found)})", ""]
    if not found:
        return lines + ["No pair of outputs diverged.", ""]
    lines += [
        f"First differing text marked ⟦…⟧; margins are top-1 minus top-2 logprob at the first differing "
        f"token (near tie: below {NEAR_TIE_MARGIN}). The HTML report shows the full outputs.",
        "",
    ]
    rows = []
    for dp in found[:MD_DIVERGENCES_SHOWN]:
        ta, tb = dp.a.output_text or "", dp.b.output_text or ""
        at = first_char_difference(ta, tb)
        rows.append(
            [
                md_escape(x)
                for x in (
                    dp.kind,
                    dp.dataset,
                    dp.example_id,
                    str(dp.divergence.position),
                    _margins(dp),
                    excerpt(ta, at),
                    excerpt(tb, at),
                )
            ]
        )
    lines += md_table(["pair", "dataset", "id", "token", "margins a / b", "output a", "output b"], rows)
    if len(found) > MD_DIVERGENCES_SHOWN:
        lines += ["", f"… and {len(found) - MD_DIVERGENCES_SHOWN} more (see report.html and summary.json)."]
    return lines + [""]


# ---------------------------------------------------------------- a run's scores.md


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "n/a" if value is None or not math.isfinite(value) else format(value, spec)


def scores_markdown(s: RunScores) -> str:
    r = s.run
    lines = [
        f"## lbeval scores: {md_escape(r.variant)} run {md_escape(r.run_id)}",
        "",
        f"model {md_escape(r.model)}; {s.n_inputs} inputs; {r.n_slots}/{r.expected_records} planned requests recorded ({r.n_records} records); "
        f"complete: {'yes' if r.complete else 'no'}; errors: {s.errors}; invalid warm attempts "
        f"{s.invalid.warm_attempts} ({s.invalid.warm_recovered} recovered, {s.invalid.warm_final} still invalid); "
        f"invalid cold attempts {s.invalid.cold_attempts}",
        "",
    ]
    v = s.cache_verification
    if v is not None and not v.verified:
        lines += [f"**{md_escape(v.describe())}.**", ""]
        lines += [f"Cold requests: {md_escape(v.cold_method)}.", ""]
    if r.warnings:
        lines += [f"- warning: {md_escape(w)}" for w in r.warnings] + [""]
    passes = [p for p in ("cold", "warm", "repeat") if p in r.passes]
    rows = []
    for acc in s.accuracy:
        cells = [md_escape(acc.dataset), md_escape(acc.metric)]
        for p in passes:
            ps = acc.passes[p]
            extra = f" ({ps.n_scored}/{ps.n_total})" if ps.n_scored < ps.n_total else ""
            cells.append(_fmt(ps.score) + extra)
        cold = acc.passes.get("cold")
        cells.append(_fmt(cold.rouge_l) if cold else "n/a")
        rows.append(cells)
    lines += ["### Official LongBench scores", ""]
    lines += md_table(["dataset", "metric", *passes, "cold ROUGE-L (rouge-score)"], rows) + [""]
    for own in run_tables(s):  # each benchmark's (LongBench v2: both figures by difficulty and length)
        lines += [f"### {md_escape(own.title)}", *render_table(own, 0)[1:]]
    lines += ["### Agreement", ""] + _agreement_lines(s) + [""]
    lines += ["### Timing (ms, mean over inputs)", ""] + _timing_lines(s) + [""]
    attribution = run_attribution_table(s)
    if attribution is not None:  # render_table numbers tables; scores.md's sections are not numbered
        lines += [f"### {md_escape(attribution.title)}", *render_table(attribution, 0)[1:]]
    lines += ["### Cache checks", ""]
    lines += md_table(
        ["pass", "expectation", "met", "invalid attempts", "recovered", "errors", "missing"],
        [
            [
                c.pass_name,
                md_escape(c.expectation),
                f"unverified {c.unverified}/{c.n_total}" if c.unverified else f"{c.ok}/{c.n_total}",
                str(c.invalid_attempts),
                str(c.recovered),
                str(c.errors),
                str(c.missing),
            ]
            for c in s.cache
        ],
    )
    return "\n".join(lines).rstrip() + "\n"


def _agreement_lines(s: RunScores) -> list[str]:
    lines = []
    for name, a in s.agreement.items():
        if a is None:
            continue
        lines.append(
            f"- {name}: text {a.text_equal}/{a.n_total}, tokens {a.tokens_equal}/{a.n_total}, first token "
            f"{a.first_token_equal}/{a.n_total}, max top-k delta {_fmt(a.max_delta, '.3g')}, min top-k overlap "
            f"{a.min_overlap if a.min_overlap is not None else 'n/a'}, divergences at "
            f"{sorted(d.position for d in a.divergences) or 'none'} (errors {a.errors}, invalid {a.invalid}, "
            f"missing {a.missing})"
        )
    u = s.unique
    lines.append(f"- prompts with more than one distinct output: {u.n_multiple}/{u.n_prompts}")
    return lines


def _timing_lines(s: RunScores) -> list[str]:
    t = s.timing
    lines = [f"- {m}: {_fmt(v, '.1f')} over {t.n_inputs[m]} inputs" for m, v in t.means.items()]
    lines.append(f"- repetitions {t.reps}, concurrency {t.concurrency}, valid: {'yes' if t.valid else 'no'}")
    lines += [f"- flag: {md_escape(f)}" for f in t.flags]
    return lines
