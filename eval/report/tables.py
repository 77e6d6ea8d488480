"""The four comparison tables as data (typed cells), each with its one-line reading.

Every number a report shows is a cell built here; the Markdown, HTML and summary.json writers only render
these cells (eval.report.cells).
"""

from __future__ import annotations

import math

from eval.analyze.accuracy import DatasetAccuracy
from eval.analyze.cache import CacheCheck
from eval.analyze.compare import BOOTSTRAP_RESAMPLES, Change, Comparison
from eval.analyze.pairs import NEAR_TIE_MARGIN, PairStats
from eval.analyze.score import RunScores
from eval.analyze.verification import CacheVerification
from eval.benchmarks.longbench.accuracy import SECONDARY_ROUGE_METRICS
from eval.report.aa_floor import aa_floor_table
from eval.report.attribution import attribution_table
from eval.report.cells import Cell, Flag, Frac, Interval, Ints, Num, Row, Sci, Table, Text
from eval.report.paired import paired_timing_table
from eval.report.v2 import v2_compare_table

MAX_POSITIONS_SHOWN = 12


def build_tables(c: Comparison) -> list[Table]:
    tables = [accuracy_table(c), agreement_table(c), cross_table(c), timing_table(c), cache_table(c)]
    v2 = v2_compare_table(c)  # LongBench v2 inputs: both denominators, by difficulty and length
    paired = paired_timing_table(c)  # lbeval ab: the interleaved figures beside the sequential-style ones
    if paired is not None:
        tables.insert(tables.index(next(t for t in tables if t.id == "timing")) + 1, paired)
    aa = aa_floor_table(c)  # --aa-floor: the A/A floor beside each timing change
    if aa is not None:
        tables.insert(tables.index(next(t for t in tables if t.id == "timing")) + 1, aa)
    return [*tables[:1], *([v2] if v2 is not None else []), *tables[1:], attribution_table(c)]


def _sides(c: Comparison) -> tuple[str, str]:
    return f"base ({c.base.scores.run.variant})", f"variant ({c.variant.scores.run.variant})"


def _interval(change: Change | None, suffix: str, decimals: int) -> Cell:
    if change is None:
        return None
    return Interval(change.estimate, change.low, change.high, decimals, suffix)


# ---------------------------------------------------------------- 1. accuracy


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
        cells += [_score(b, "warm"), _score(v, "warm"), _interval(c.warm_changes.get(ds), "", 2)]
        if has_rouge:
            cells += [_rouge(b), _rouge(v)]
        rows.append(Row(ds, ds, cells))
    note = ""
    if has_rouge:
        note = (
            "* secondary column: ROUGE-L F-measure from Google's rouge-score package (the official "
            "score column uses the `rouge` package LongBench uses; the two give different numbers)."
        )
    if any(a.v2 for a in base.accuracy):
        note = (note + " " if note else "") + (
            "longbench_v2 (LongBench v2): accuracy in % with the official answer extraction, over every input "
            "(lbeval's denominator); the official result.py figures, by difficulty and length, are in the "
            "LongBench v2 table."
        )
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


# ---------------------------------------------------------------- 2. agreement


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
        ["measure", *_sides(c)],
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


# ---------------------------------------------------------------- 3. timing


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
                    _interval(ch, "%", 1),
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
    columns = ["measure", *_sides(c), f"change [{level}]", "inputs"]
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
    measured = (
        f"{ch.estimate:+.1f}%, {ch.ci_label} {ch.low:+.1f}% to {ch.high:+.1f}%, over {ch.n_inputs} inputs"
    )
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
            f"No detectable change in {what}: {ch.estimate:+.1f}%, "
            f"{ch.ci_label} {ch.low:+.1f}% to {ch.high:+.1f}% includes 0"
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


# ---------------------------------------------------------------- 4. cache and validity


def _check_cell(check: CacheCheck | None) -> Cell:
    """k/N requests that met the pass's cache expectation; `unverified k/N` when the server could not say."""
    if check is None:
        return None
    if check.unverified:
        return Text(f"unverified {check.unverified}/{check.n_total}")
    return Frac(check.ok, check.n_total)


def _verification_rows(c: Comparison) -> list[Row]:
    """The server each run ran against, whether its cache state was verified, and how cold was made."""
    runs = (c.base.scores.cache_verification, c.variant.scores.cache_verification)
    if all(v is None or (v.verified and v.server_kind == "vllm") for v in runs):
        return []  # two verified vLLM runs: the rows below say it already

    def server(v: CacheVerification | None) -> Cell:
        return (
            None if v is None else Text(v.server_label + (f" {v.server_version}" if v.server_version else ""))
        )

    def state(v: CacheVerification | None) -> Cell:
        if v is None:
            return None
        return Text("verified" if v.verified else f"UNVERIFIED ({v.unverified_records}/{v.records} records)")

    return [
        Row("server", "server", [server(v) for v in runs]),
        Row("cache_state", "cache state (the server's cached-token count checked per request)", [state(v) for v in runs]),
        Row("cold_method", "how cold requests missed the cache", [None if v is None else Text(v.cold_method) for v in runs]),
    ]  # fmt: skip


def cache_table(c: Comparison) -> Table:
    rows: list[Row] = _verification_rows(c)
    checks = [{x.pass_name: x for x in run.scores.cache} for run in (c.base, c.variant)]
    passes = list(dict.fromkeys([*checks[0], *checks[1]]))
    for p in passes:
        expectation = (checks[0].get(p) or checks[1][p]).expectation
        rows.append(Row(f"{p}_ok", f"{p}: {expectation}", [_check_cell(ch.get(p)) for ch in checks]))
    invalid_rows = (
        (
            "invalid_warm_attempts",
            "invalid warm attempts: warm, repeat, timing_warm missed the cache (or hit short: fewer cached "
            "tokens than promised, not retried)",
            "warm_attempts",
        ),
        ("invalid_warm_recovered", "of which recovered by the re-primed retry", "warm_recovered"),
        ("invalid_warm_final", "warm samples still invalid (never scored)", "warm_final"),
        ("invalid_cold_attempts", "invalid cold attempts: cold, timing_cold hit the cache", "cold_attempts"),
    )
    for key, label, attr in invalid_rows:
        rows.append(
            Row(key, label, [Num(getattr(run.scores.invalid, attr), 0) for run in (c.base, c.variant)])
        )
    rows.append(
        Row(
            "errors",
            "errored requests (all passes)",
            [Num(run.scores.errors, 0) for run in (c.base, c.variant)],
        )
    )
    rows.append(
        Row(
            "cache_findings",
            "usage's cached tokens differ from the server's hit count (cache_finding)",
            [
                Num(sum(r.cache_finding is not None for r in run.loaded.records), 0)
                for run in (c.base, c.variant)
            ],
        )
    )
    rows.append(
        Row(
            "recorded",
            "planned requests with a record",
            [Frac(run.scores.run.n_slots, run.scores.run.expected_records) for run in (c.base, c.variant)],
        )
    )
    rows.append(
        Row(
            "torn_lines",
            "torn record lines dropped",
            [Num(run.scores.run.torn_lines, 0) for run in (c.base, c.variant)],
        )
    )
    rows.append(
        Row("complete", "run complete", [Flag(run.scores.run.complete) for run in (c.base, c.variant)])
    )
    rows.append(
        Row("concurrency", "concurrency", [Num(_concurrency(run.scores), 0) for run in (c.base, c.variant)])
    )
    return Table("cache", "Cache controls and validity", cache_reading(c), ["check", *_sides(c)], rows)


def _concurrency(scores: RunScores) -> float | None:
    value = scores.timing.concurrency
    return float(value) if isinstance(value, int | float) else None


def cache_reading(c: Comparison) -> str:
    problems = []
    for side, run in (("base", c.base), ("variant", c.variant)):
        s = run.scores
        v = s.cache_verification
        if v is not None and not v.verified:
            problems.append(f"{side}: {v.describe()}; cold: {v.cold_method}")
        unmet = [
            f"{x.pass_name} {x.ok}/{x.n_total}" for x in s.cache if x.ok < x.n_total and not x.unverified
        ]
        inv = s.invalid
        items = [f"cache expectation unmet ({', '.join(unmet)})"] if unmet else []
        items += [f"{inv.warm_attempts} invalid warm attempt(s)"] if inv.warm_attempts else []
        items += [f"{inv.cold_attempts} invalid cold attempt(s)"] if inv.cold_attempts else []
        items += [f"{s.errors} error(s)"] if s.errors else []
        items += ["incomplete"] if not s.run.complete else []
        if items:
            problems.append(f"{side}: " + "; ".join(items))
    if not problems:
        return "Every cache check and control met its expectation in both runs; no errors, no invalid warm samples."
    return "Problems: " + " | ".join(problems) + "."
