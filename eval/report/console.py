"""The compact terminal summary of `lbeval score`, `lbeval compare` and `lbeval gate`.

At most 40 lines on the demo, plain text at most WIDTH columns wide: scores per dataset, agreement k/N, the
timing change, the cache checks, the cold numerics across the variants when they changed, the cause rows that
differ (each named once), the gate's verdict (referring to those rows), and the absolute path of the full
reports (`--full` prints the Markdown report instead). No Markdown escapes, no colour: it reads the same in a terminal and in a CI log.

It renders what the reports render (the cells and readings of eval/report/tables.py, a run's scores, the gate's
Verdict) and computes nothing. Commands print it through eval.terminal.echo, which makes server and model text
inert.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

from eval.analyze.causes import CauseRow, RowSide, cause_rows
from eval.analyze.compare import Comparison
from eval.analyze.score import RunScores
from eval.analyze.spec_decode import SpecDecode
from eval.gate.policy import RULE_PARAMS, Policy
from eval.gate.verdict import FAIL, NO_DATA, SKIPPED, RuleResult, Verdict, named
from eval.report.banner import banner, failed_rows, table_marks
from eval.report.cells import Table, cell_text
from eval.report.format import fmt3

WIDTH = 100
GUTTER = 11  # the label column ("agreement ", "verdict   ", ...)
MAX_ROW_LINES = 8  # more differing cause rows than this: listed as a few wrapped lines, not one line each
DELTA_FLOOR: float = RULE_PARAMS["cause_rows"]["delta_floor"][1]  # the shipped cause_rows floor (nats)


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
    if s.spec_decode is not None:
        lines += wrap("drafts", spec_decode_text(s.spec_decode))
    return lines + [paths_line(paths)]


def spec_decode_text(d: SpecDecode) -> str:
    """Speculative decoding in one line: acceptance, mean acceptance length, per position, what was counted."""
    if not d.drafts:
        return f"speculative decoding: no drafts counted ({d.counted} requests measured)"
    positions = ", ".join(f"{r:.0%}" for r in d.position_rates)
    left = [
        f"{n} {what}" for n, what in ((d.foreign, "with foreign figures"), (d.unmeasured, "unmeasured")) if n
    ]
    return (
        f"accepted {d.accepted}/{d.draft_tokens} draft tokens ({_fmt(d.acceptance_rate, '.1%')}), mean "
        f"acceptance length {_fmt(d.mean_acceptance_length, '.2f')} over {d.drafts} drafts; by position "
        f"{positions}; {d.counted} requests" + (f" ({', '.join(left)} left out)" if left else "")
    )


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


def refers_to_causes(r: RuleResult) -> bool:
    """A failing rule whose failing rows are all attribution rows: the `causes` block lists each of them with
    its figures and the rule's name, so the verdict refers to them instead of naming them again."""
    refs = [ref for ref in r.rows if ref.failed]
    return r.status == FAIL and bool(refs) and all(ref.table == "attribution" for ref in refs)


def _short_name(r: RuleResult) -> str:
    return r.rule if refers_to_causes(r) else named(r)


def _referred(r: RuleResult) -> str:
    """What a rule that refers to the causes block measured: how many of the rows it judged fail."""
    return f"fails on {len(r.failed_rows)} of the {len(r.rows)} rows it judged (marked FAIL under causes)"


def verdict_lines(verdict: Verdict | None) -> list[str]:
    """The verdict: its headline, the rules that fail or have no data, the no-verdict reasons, skipped rules.
    A rule failing on cause rows is named without its rows: the `causes` block above names them."""
    b = banner(verdict, _short_name)
    lines = wrap("verdict", b.headline)
    for r in b.checked:
        if refers_to_causes(r):
            lines += wrap("", f"{r.status.upper()} {r.rule}: {_referred(r)}")
        elif r.status in (FAIL, NO_DATA):
            lines += wrap(
                "", f"{r.status.upper()} {r.rule}: {r.measured}" + (f" ({r.detail})" if r.detail else "")
            )
    lines += [x for reason in b.reasons for x in wrap("", f"- {reason}")]
    skipped = [r.rule for r in (verdict.results if verdict else []) if r.status == SKIPPED]
    if skipped:
        lines += wrap("", f"skipped: {', '.join(skipped)}")
    return lines


def policy_floor(policy: Policy) -> float:
    """The policy's cause_rows delta_floor (the shipped one when the policy has no cause_rows table)."""
    return float(policy.rules.get("cause_rows", {}).get("delta_floor", DELTA_FLOOR))


def numerics_changed(c: Comparison, delta_floor: float = DELTA_FLOOR) -> str:
    """The `numerics` line's text when the variant's cold outputs differ from the base's (a valid pair whose token IDs
    differ, or a max top-k |delta| above `delta_floor`, cause_rows' floor): the variant changed numerics
    everywhere, and the cause rows that differ may all be that one change. "" when they do not."""
    s = c.cross_agreement.get("cold")
    if s is None or s.n_pairs == 0:
        return ""
    moved = s.max_delta is not None and not s.max_delta <= delta_floor  # nan and inf moved too
    if s.tokens_equal >= s.n_pairs and not moved:
        return ""
    return (
        f"changed everywhere: cold outputs equal {s.tokens_equal}/{s.n_total} across variants "
        f"(token IDs), max top-k |delta| {fmt3(s.max_delta)} (floor {delta_floor:g})"
    )


def _side(s: RowSide | None) -> tuple[str, str]:
    if s is None:
        return "not measured", "n/a"
    return s.tokens, "n/a" if s.max_delta is None else f"{s.max_delta:.2g}"


def _cause_line(r: CauseRow, rules: Sequence[str]) -> str:
    (vt, vd), (bt, bd) = _side(r.variant), _side(r.base)
    text = f"tokens {vt} vs base {bt}, max |delta| {vd} vs {bd}"
    return f"{' ' * GUTTER}{r.key:<18} {text}" + (f"  FAIL {', '.join(rules)}" if rules else "")


def _compact_causes(rows: Sequence[CauseRow], marks: dict[str, list[str]]) -> list[str]:
    """The rows as a few wrapped lines: grouped by the rules that fail on them, each row's key with its
    tokens-equal k/N and max |delta|, variant vs base."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for r in rows:
        (vt, vd), (bt, bd) = _side(r.variant), _side(r.base)
        groups.setdefault(tuple(marks.get(r.key, [])), []).append(f"{r.key} {vt} vs {bt}, {vd} vs {bd}")
    lines = []
    for rules, items in sorted(groups.items(), key=lambda g: not g[0]):
        head = f"FAIL {', '.join(rules)}: " if rules else "no rule fails: "
        lines += wrap("", head + "; ".join(items), indent=GUTTER + 2)
    return lines


def cause_lines(c: Comparison, verdict: Verdict | None, delta_floor: float = DELTA_FLOOR) -> list[str]:
    """The attribution rows where the variant differs from the base (other k/N, or measured by one run only,
    eval/analyze/causes.py) or that a rule fails (its max |delta|), whatever the verdict; [] when none does and
    the cold numerics did not change. Each row is named once, with the tokens-equal k/N of both runs and their
    max |top-k logprob delta|: one line per row, or, when the cold outputs differ across the variants (the
    `numerics` line comes first) or more than MAX_ROW_LINES rows differ, a few lines grouped by failing rule."""
    marks = table_marks(failed_rows(verdict), "attribution")
    rows = [r for r in cause_rows(c) if r.differs or r.key in marks]
    numerics = numerics_changed(c, delta_floor)
    lines = wrap("numerics", numerics) if numerics else []
    if not rows:
        return lines
    if numerics or len(rows) > MAX_ROW_LINES:
        also = " also" if numerics else ""
        lines += wrap("causes", f"{len(rows)} cause row(s){also} differ from the base (tokens equal k/N and "
                                "max |delta|, variant vs base):")  # fmt: skip
        return lines + _compact_causes(rows, marks)
    lines += wrap(
        "causes", f"{len(rows)} cause row(s) where the variant differs from the base (variant vs base):"
    )
    return lines + [x for r in rows for x in hang(_cause_line(r, marks.get(r.key, [])), GUTTER + 2)]


def compare_summary(
    c: Comparison,
    tables: Sequence[Table],
    verdict: Verdict | None,
    paths: Sequence[Path],
    delta_floor: float = DELTA_FLOOR,
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
    if "spec_decode" in by_id:  # a server with a speculative draft
        lines += wrap("drafts", by_id["spec_decode"].reading)
    lines += cause_lines(c, verdict, delta_floor)
    if c.warnings:
        lines += wrap("warnings", f"{len(c.warnings)} (listed in the report)")
    return lines + verdict_lines(verdict) + [paths_line(paths)]


# ---------------------------------------------------------------- lbeval gate


def rule_line(r: RuleResult) -> str:
    """`lbeval gate`'s line for one rule; a rule failing on cause rows refers to the `causes` block printed
    above it (which names each row with its figures) instead of repeating them."""
    if refers_to_causes(r):
        return f"{r.status.upper():8} {r.rule}: measured {_referred(r)}; threshold {r.threshold}"
    return r.line()


def gate_lines(verdict: Verdict) -> list[str]:
    """`lbeval gate`'s per-rule lines and its summary line, wrapped to WIDTH (continuations indented)."""
    lines = [x for result in verdict.results for x in hang("  " + rule_line(result))]
    if verdict.stopped:  # a stopped lbeval ab session (eval/gate/settle.py)
        lines += hang(f"gate: the session {verdict.stopped}")
    return lines + hang(verdict.summary)
