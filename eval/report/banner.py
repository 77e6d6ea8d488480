"""The verdict banner at the top of report.md and report.html: the gate's Verdict, as the report shows it.

The report never evaluates a rule. It renders the Verdict that `eval.gate.rules.evaluate` returned (the one
`lbeval gate` turns into its exit code) and marks the table rows each failing rule points at
(`RuleResult.rows`: table id and row key, set by the rule itself).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eval.gate.verdict import (
    EXIT_FAIL,
    EXIT_NO_VERDICT,
    EXIT_PASS,
    FAIL,
    PASS,
    SKIPPED,
    RuleResult,
    Verdict,
    named,
)

NOT_EVALUATED = "NOT EVALUATED"


@dataclass(frozen=True)
class Banner:
    outcome: str  # PASS | FAIL | NO VERDICT | NOT EVALUATED
    headline: str  # one sentence: the outcome and what `lbeval gate` exits with
    checked: list[RuleResult]  # pass, fail, no data: in the policy's order
    skipped: list[RuleResult]  # not in the policy, or disabled; `threshold` says which
    reasons: list[str]  # why there is no verdict
    policy: str


def banner(verdict: Verdict | None, name: Callable[[RuleResult], str] = named) -> Banner:
    """The banner of `verdict`; `name` names a failing rule in the headline (default: with its failing rows;
    the terminal summary, which lists cause rows in its own block, names them there)."""
    if verdict is None:
        headline = "No gate verdict: this report was written without a policy (see lbeval gate)."
        return Banner(NOT_EVALUATED, headline, [], [], [], "")
    checked = [r for r in verdict.results if r.status != SKIPPED]
    skipped = [r for r in verdict.results if r.status == SKIPPED]
    judged = [r for r in checked if r.status in (PASS, FAIL)]
    failed = [name(r) for r in judged if r.status == FAIL]  # a row rule names its failing rows
    exits = f"lbeval gate exits {verdict.exit_code}"
    if verdict.exit_code == EXIT_NO_VERDICT:
        n = len(verdict.reasons)
        headline = f"NO VERDICT: the data cannot support one ({n} reason{'s' * (n != 1)} below; {exits})."
    elif verdict.exit_code == EXIT_FAIL:
        headline = f"FAIL: {len(failed)} of {len(judged)} rules failed: {', '.join(failed)} ({exits})."
    else:
        assert verdict.exit_code == EXIT_PASS
        headline = f"PASS: all {len(judged)} checked rules hold ({exits})."
    if verdict.stopped:  # a stopped lbeval ab session: how far it ran, why, and what it cost
        headline = f"{headline} The session {verdict.stopped}."
    return Banner(verdict.outcome, headline, checked, skipped, list(verdict.reasons), verdict.policy)


def failed_rows(verdict: Verdict | None) -> dict[tuple[str, str], list[str]]:
    """(table id, row key) -> the rules that fail on that row."""
    marks: dict[tuple[str, str], list[str]] = {}
    for result in verdict.results if verdict is not None else []:
        if result.status != FAIL:
            continue
        for ref in result.rows:
            if ref.failed:
                marks.setdefault((ref.table, ref.row), []).append(result.rule)
    return marks


def table_marks(marks: dict[tuple[str, str], list[str]], table_id: str) -> dict[str, list[str]]:
    """One table's marks: row key -> failing rules."""
    return {row: rules for (table, row), rules in marks.items() if table == table_id}
