"""The compact terminal summary of `lbeval score`, `lbeval compare` and `lbeval gate`.

About a dozen lines of plain text at most WIDTH columns wide: scores per dataset, agreement k/N, the timing
change, the cache checks, the gate's verdict, and the absolute path of the full reports (`--full` prints the
Markdown report instead). No Markdown escapes, no colour: it reads the same in a terminal and in a CI log.

It renders what the reports render (the cells and readings of eval/report/tables.py, a run's scores, the gate's
Verdict) and computes nothing. Commands print it through eval.terminal.echo, which makes server and model text
inert.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

from eval.analyze.causes import CauseRow, cause_rows
from eval.analyze.compare import Comparison
from eval.analyze.score import RunScores
from eval.gate.verdict import FAIL, NO_DATA, SKIPPED, Verdict
from eval.report.banner import banner, failed_rows, table_marks
from eval.report.cells import Table, cell_text

WIDTH = 100
GUTTER = 11  # the label column ("agreement ", "verdict   ", ...)


def wrap(label: str, text: str, width: int = WIDTH, indent: int = GUTTER) -> list[str]:
    """`label` in the gutter, then `text` wrapped to `width` columns with a hanging indent (words are never
    split: a single word longer than the line, such as a path, keeps its line)."""
    return textwrap.wrap(
        text,
        width,
        initial_indent=label.ljust(indent),
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [label.rstrip()]


def hang(text: str, indent: int = GUTTER) -> list[str]:
    """`text` as is on its first line, continued with `indent` spaces (a gate line stays one greppable line
    when the continuations are joined back)."""
    return textwrap.wrap(
        text, WIDTH, subsequent_indent=" " * indent, break_long_words=False, break_on_hyphens=False
    ) or [""]


def columns(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 2) -> list[str]:
    """A plain aligned table: the first `left` columns left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return [line(header), *(line(r) for r in rows)]


def paths_line(paths: Sequence[Path]) -> str:
    """The absolute path of the first report, the others named beside it (same folder)."""
    first = paths[0].resolve()
    others = ", ".join(p.name for p in paths[1:])
    return f"{'wrote':<{GUTTER}}{first}" + (f" (and {others})" if others else "")


# ---------------------------------------------------------------- lbeval score


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def score_summary(s: RunScores, paths: Sequence[Path]) -> list[str]:
    r = s.run
    state = "complete" if r.complete else "INCOMPLETE (re-run `lbeval run` with the same arguments to resume)"
    lines = [f"lbeval score: {r.variant} run {r.run_id}: {state}"]
    lines += wrap(
        "run",
        f"model {r.model}; {s.n_inputs} inputs; {r.n_slots}/{r.expected_records} planned requests recorded; "
        f"{s.errors} errors; {s.invalid.warm_attempts} invalid warm attempts",
    )
    if r.warnings:
        lines += wrap("warnings", "; ".join(r.warnings))
    passes = [p for p in ("cold", "warm", "repeat") if p in r.passes]
    rows = []
    for acc in s.accuracy:
        scored = [acc.passes[p] for p in passes]
        n = f"{min(ps.n_scored for ps in scored)}/{max(ps.n_total for ps in scored)}" if scored else "n/a"
        rows.append([acc.dataset, acc.metric, *(_fmt(ps.score) for ps in scored), n])
    lines += columns(["dataset", "metric", *passes, "scored"], rows)
    parts = [
        f"{name.replace('_', '/')} {a.text_equal}/{a.n_total}"
        for name, a in s.agreement.items()
        if a is not None and name != "timing_first_token"
    ]
    first = s.agreement.get("timing_first_token")
    if first is not None:
        parts.append(f"first token (timing) {first.first_token_equal}/{first.n_total}")
    lines += wrap("agreement", "outputs equal (text): " + (", ".join(parts) or "no pairs"))
    lines += wrap("timing", _run_timing(s))
    unmet = [f"{x.pass_name} {x.ok}/{x.n_total}" for x in s.cache if x.ok < x.n_total and not x.unverified]
    text = ("expectation unmet: " + ", ".join(unmet)) if unmet else "every pass met its cache expectation"
    v = s.cache_verification
    if v is not None and not v.verified:  # nothing was checked: say so, never "met"
        text = v.describe() + f"; cold: {v.cold_method}" + (f"; {text}" if unmet else "")
    lines += wrap("cache", text)
    return lines + [paths_line(paths)]


def _run_timing(s: RunScores) -> str:
    t = s.timing
    if not t.reps:
        return "no timing passes"
    means = ", ".join(
        f"{label} {_fmt(t.means.get(m), '.1f')} ms"
        for m, label in (("warm_prefill_ms", "warm prefill"), ("cold_prefill_ms", "cold prefill"),
                         ("warm_ttft_ms", "warm TTFT"), ("cold_ttft_ms", "cold TTFT"))
        if t.means.get(m) is not None
    )  # fmt: skip
    valid = "" if t.valid else "; timing flagged invalid: " + "; ".join(t.flags)
    return f"{means or 'no values'} (mean over inputs, {t.reps} repetitions){valid}"


# ---------------------------------------------------------------- lbeval compare


def accuracy_lines(table: Table, verdict: Verdict | None) -> list[str]:
    """The accuracy table's rows, the cells as the reports show them; rows a rule fails end in `FAIL rule`."""
    marks = table_marks(failed_rows(verdict), table.id)
    keep = [
        "dataset",
        "metric",
        "base cold",
        "variant cold",
        "cold outputs identical",
        "base warm",
        "variant warm",
    ]
    index = [table.columns.index(c) for c in keep if c in table.columns]
    header = ["dataset", "metric", "base cold", "variant cold", "cold same", "base warm", "variant warm"]
    rows = []
    for r in table.rows:
        cells = [r.label, *(cell_text(c) for c in r.cells)]
        mark = ("FAIL " + ", ".join(marks[r.key])) if r.key in marks else ""
        rows.append([cells[i] for i in index] + ([mark] if marks else []))
    return columns(header[: len(index)] + (["gate"] if marks else []), rows)


def verdict_lines(verdict: Verdict | None) -> list[str]:
    """The verdict: its headline, the rules that fail or have no data, the no-verdict reasons, skipped rules."""
    b = banner(verdict)
    lines = wrap("verdict", b.headline)
    for r in b.checked:
        if r.status in (FAIL, NO_DATA):
            lines += wrap(
                "", f"{r.status.upper()} {r.rule}: {r.measured}" + (f" ({r.detail})" if r.detail else "")
            )
    lines += [x for reason in b.reasons for x in wrap("", f"- {reason}")]
    skipped = [r.rule for r in (verdict.results if verdict else []) if r.status == SKIPPED]
    if skipped:
        lines += wrap("", f"skipped: {', '.join(skipped)}")
    return lines


def _cause_line(r: CauseRow, rules: Sequence[str]) -> str:
    v, b = r.variant, r.base
    tokens = f"tokens {v.tokens if v else 'not measured'} vs base {b.tokens if b else 'not measured'}"
    deltas = [("n/a" if s is None or s.max_delta is None else f"{s.max_delta:.2g}") for s in (v, b)]
    text = f"{tokens}, max |delta| {deltas[0]} vs {deltas[1]}"
    return f"{' ' * GUTTER}{r.key:<18} {text}" + (f"  FAIL {', '.join(rules)}" if rules else "")


def cause_lines(c: Comparison, verdict: Verdict | None) -> list[str]:
    """One line per attribution row where the variant differs from the base (other k/N, or measured by one
    run only, eval/analyze/causes.py) or that a rule fails (its max |delta|), whatever the verdict; [] when
    none does. Each: the row key, tokens-equal k/N of both runs, their max |top-k logprob delta|."""
    marks = table_marks(failed_rows(verdict), "attribution")
    rows = [r for r in cause_rows(c) if r.differs or r.key in marks]
    if not rows:
        return []
    lines = wrap(
        "causes", f"{len(rows)} cause row(s) where the variant differs from the base (variant vs base):"
    )
    return lines + [x for r in rows for x in hang(_cause_line(r, marks.get(r.key, [])), GUTTER + 2)]


def compare_summary(
    c: Comparison, tables: Sequence[Table], verdict: Verdict | None, paths: Sequence[Path]
) -> list[str]:
    by_id = {t.id: t for t in tables}
    b, v = c.base.scores.run, c.variant.scores.run
    lines = hang(f"lbeval compare: base {b.variant} (run {b.run_id}) vs variant {v.variant} (run {v.run_id})")
    lines += wrap(
        "inputs", f"{c.base.scores.n_inputs} ({', '.join(c.base.scores.datasets)}); model {b.model}"
    )
    lines += accuracy_lines(by_id["accuracy"], verdict)
    lines += wrap("agreement", by_id["agreement"].reading)
    lines += wrap("timing", by_id["timing"].reading)
    if "aa_floor" in by_id:  # --aa-floor
        lines += wrap("A/A floor", by_id["aa_floor"].reading)
    lines += wrap("cache", by_id["cache"].reading)
    lines += cause_lines(c, verdict)
    if c.warnings:
        lines += wrap("warnings", f"{len(c.warnings)} (listed in the report)")
    return lines + verdict_lines(verdict) + [paths_line(paths)]


# ---------------------------------------------------------------- lbeval gate


def gate_lines(verdict: Verdict) -> list[str]:
    """`lbeval gate`'s per-rule lines and its summary line, wrapped to WIDTH (continuations indented)."""
    lines = [x for result in verdict.results for x in hang("  " + result.line())]
    if verdict.stopped:  # a stopped lbeval ab session (eval/gate/settle.py)
        lines += hang(f"gate: the session {verdict.stopped}")
    return lines + hang(verdict.summary)
