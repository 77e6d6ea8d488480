"""The gate's verdict: one result per rule and the exit code (0 pass, 1 a rule fails, 2 no verdict), and the one
fold of the rules' results and the data's reasons into it (`fold`).

The report layer shows the same Verdict in its banner that `lbeval gate` turns into its exit code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from eval.gate.registry import rule
from eval.gate.rule import FAIL, NO_DATA, PASS, SKIPPED, STRADDLES, RowRef, RuleResult

__all__ = [
    "EXIT_FAIL", "EXIT_NO_VERDICT", "EXIT_PASS", "FAIL", "NO_DATA", "OUTCOMES", "PASS", "SKIPPED", "RowRef",
    "RuleResult", "Verdict", "fold", "named", "no_data_reason", "no_verdict", "undecided",
]  # fmt: skip

EXIT_PASS, EXIT_FAIL, EXIT_NO_VERDICT = 0, 1, 2
OUTCOMES = {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL", EXIT_NO_VERDICT: "NO VERDICT"}


@dataclass(frozen=True)
class Verdict:
    exit_code: int
    results: list[RuleResult]
    reasons: list[str] = field(default_factory=list)  # why there is no verdict
    policy: str = ""  # the policy's source (file path, or the shipped default)
    # a stopped `lbeval ab --stop-when-settled` session (eval/gate/settle.py): "stopped after k of N inputs: ..."
    stopped: str = ""

    @property
    def outcome(self) -> str:
        """PASS, FAIL or NO VERDICT."""
        return OUTCOMES[self.exit_code]

    @property
    def summary(self) -> str:
        if self.exit_code == EXIT_NO_VERDICT:
            return "gate: NO VERDICT (exit 2): " + "; ".join(self.reasons)
        checked = [r for r in self.results if r.status in (PASS, FAIL)]
        failed = [r for r in checked if r.status == FAIL]
        if failed:
            return f"gate: FAIL (exit 1): {len(failed)} of {len(checked)} rules failed: " + ", ".join(
                named(r) for r in failed
            )
        return f"gate: PASS (exit 0): all {len(checked)} rules hold"


def fold(
    statuses: Sequence[str], blocking: Sequence[str], thin: Sequence[str], missing: Sequence[str]
) -> tuple[int, list[str]]:
    """The verdict, written once: (exit code, reasons). Damaged data (`blocking`: runs that differ, damage, an
    incomplete run): no verdict, whatever the rules say. Else a FAIL beats thin data: a rule that fails on whole,
    matched, undamaged runs is a finding even where other rules or the valid pairs are too thin to judge (a
    fault that makes warm requests invalid must FAIL on its own row, not hide behind the no-verdict it causes).
    Else thin data (`thin`) or a rule with no data (`missing`, one reason each) blocks a PASS, and so does a
    policy that checks no rule. `statuses`: the rules' statuses (PASS, FAIL, NO_DATA, SKIPPED)."""
    if blocking:
        return EXIT_NO_VERDICT, list(blocking)
    if FAIL in statuses:
        return EXIT_FAIL, []
    reasons = [*thin, *missing]
    if not reasons and PASS not in statuses:
        reasons.append("the policy checks no rule")
    return (EXIT_NO_VERDICT, reasons) if reasons else (EXIT_PASS, [])


def undecided(r: RuleResult) -> bool:
    """A three-way rule whose interval straddles its limit: measured but undecided, not missing data."""
    return r.status == NO_DATA and r.detail.startswith(STRADDLES)


def no_data_reason(r: RuleResult) -> str:
    """The no-verdict reason of a rule result with no data (a timing interval across its limit: undecided)."""
    if undecided(r):
        return f"rule {r.rule} is undecided: {r.measured}: {r.detail}"
    return f"rule {r.rule} has no data: {r.measured}"


def named(r: RuleResult) -> str:
    """The rule's name, with the rows it fails on when the rule names several kinds of row (Rule.names_rows;
    cause_rows: "cause_rows [hitlen, hitlen_L_32]"); one-row rules are named alone."""
    rows = r.failed_rows
    known = rule(r.rule)
    return (
        f"{r.rule} [{', '.join(rows[:6])}{', ...' if len(rows) > 6 else ''}]"
        if known is not None and known.names_rows and rows
        else r.rule
    )


def no_verdict(reason: str) -> Verdict:
    return Verdict(EXIT_NO_VERDICT, [], [reason])
