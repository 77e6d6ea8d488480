"""The gate's verdict: one result per rule and the exit code (0 pass, 1 a rule fails, 2 no verdict).

The report layer shows the same Verdict in its banner that `lbeval gate` turns into its exit code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

EXIT_PASS, EXIT_FAIL, EXIT_NO_VERDICT = 0, 1, 2

PASS, FAIL, NO_DATA, SKIPPED = "pass", "fail", "no data", "skipped"
OUTCOMES = {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL", EXIT_NO_VERDICT: "NO VERDICT"}


@dataclass(frozen=True)
class RowRef:
    """A row of the comparison report that a rule judged: the table's id and the row's key, as
    eval/report/tables.py names them (e.g. ("accuracy", "qasper")); `failed`: the rule fails on this row."""

    table: str
    row: str
    failed: bool = False


@dataclass(frozen=True)
class RuleResult:
    rule: str
    status: str  # pass | fail | no data | skipped
    measured: str
    threshold: str
    detail: str = ""
    rows: tuple[RowRef, ...] = ()  # what the rule judged, so the report can mark the failing rows

    @property
    def failed_rows(self) -> list[str]:
        """The keys of the report rows this rule fails on (RowRef.failed), in its order."""
        return [ref.row for ref in self.rows if ref.failed]

    def line(self) -> str:
        if self.status == SKIPPED:
            return f"{self.status.upper():8} {self.rule}: {self.threshold}"
        text = f"{self.status.upper():8} {self.rule}: measured {self.measured}; threshold {self.threshold}"
        return text + (f" ({self.detail})" if self.detail else "")


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


def named(r: RuleResult) -> str:
    """The rule's name, with the rows it fails on when it names several kinds of row (cause_rows: "cause_rows
    [hitlen, hitlen_L_32]"); one-row rules are named alone."""
    rows = r.failed_rows
    return (
        f"{r.rule} [{', '.join(rows[:6])}{', ...' if len(rows) > 6 else ''}]"
        if r.rule in ROW_RULES and rows
        else r.rule
    )


# rules whose failing rows are named beside them in the summary, the banner and JUnit
ROW_RULES = frozenset(
    {"cause_rows", "cache_isolation", "batch_invariant", "hitlen_equality", "traffic_invariant"}
)


def no_verdict(reason: str) -> Verdict:
    return Verdict(EXIT_NO_VERDICT, [], [reason])
