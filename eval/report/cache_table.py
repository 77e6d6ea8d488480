"""The cache and validity table: what each request's cache verification found on both sides, with its reading."""

from __future__ import annotations

from eval.analyze.cache import CacheCheck
from eval.analyze.compare import Comparison
from eval.analyze.score import RunScores
from eval.analyze.verification import CacheVerification
from eval.report.cells import Cell, Flag, Frac, Num, Row, Table, Text
from eval.report.columns import side_columns


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
    return Table("cache", "Cache controls and validity", cache_reading(c), ["check", *side_columns(c)], rows)


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
