"""A gate rule as one object, and the registry of rules.

A rule (`Rule`) says, in its own module of eval/gate/ruleset/: its policy parameters (with their types and
ranges, so the policy file is checked against them), what it reads (the runs, whether it needs a verified cache
state, the passes it compares), how it judges a comparison (-> `RuleResult`) and how it settles early on a
stopped `lbeval ab` session (-> `RuleSettlement`; none: it settles with the full run). A module registers its
rules with `register`; a name registered twice is refused. The gate, the policy, JUnit, the banner, the summary
and docs/gate.md list the rules from the registry (eval/gate/registry.py loads every module).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval.analyze.compare import Comparison
from eval.analyze.score import ScoredRun
from eval.records.stop import OPEN, SETTLED_FAIL, SETTLED_PASS, RuleSettlement
from eval.run.adaptive import PairRatios

__all__ = [
    "AA_MULTIPLE", "BOTH_RUNS", "COUNT", "DELTA", "FACTOR", "FAIL", "FRACTION", "NO_DATA", "PASS", "PERCENT",
    "POINTS", "SKIPPED", "STRADDLES", "Kind", "Look", "Number", "Params", "RowRef", "Rule", "RuleResult", "Text",
    "count_max", "count_share", "full_run", "register", "registered", "rule_named", "runs_named", "unregister",
]  # fmt: skip

PASS, FAIL, NO_DATA, SKIPPED = "pass", "fail", "no data", "skipped"
# a three-way rule's middle outcome (no verdict, undecided): its result's detail starts with this
STRADDLES = "interval straddles the limit"


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


# ---------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Number:
    """A numeric parameter: its type (a TOML integer is accepted for a float) and its range, inclusive."""

    type: type
    what: str
    low: float = 0.0
    high: float = math.inf

    def problem(self, value: int | float) -> str | None:
        if not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
        if not self.low <= value <= self.high:
            return f"must be {self.what}, got {value!r}"
        return None


@dataclass(frozen=True)
class Text:
    """A string parameter: `check` says what is wrong with a value (None: nothing)."""

    type: type
    check: Callable[[str], str | None]

    def problem(self, value: str) -> str | None:
        return self.check(value)


COUNT = Number(int, "a count >= 0")
FRACTION = Number(float, "a fraction in [0, 1]", high=1.0)
POINTS = Number(float, "score points >= 0")
PERCENT = Number(float, "a percentage >= 0")
# a limit below the A/A floor could not be told from what two identical configurations show
AA_MULTIPLE = Number(float, "a multiple of the A/A floor in [1, 1000]", low=1.0, high=1000.0)
FACTOR = Number(float, "a factor >= 1", low=1.0)
DELTA = Number(float, "a logprob difference >= 0 (nats)")
Kind = type | Number | Text
# parameter -> (kind, default); `list` is a non-empty list of "base" and/or "variant"; `enabled` is implicit
Params = Mapping[str, tuple[Kind, Any]]
BOTH_RUNS = ["base", "variant"]


# ---------------------------------------------------------------- the rule


@dataclass(frozen=True)
class Look:
    """One look at an `lbeval ab --stop-when-settled` session: the comparison on the inputs run, k of N, the
    gate's result per rule there (eval/gate/settle.py)."""

    c: Comparison
    k: int
    n: int
    results: Mapping[str, RuleResult]
    adaptive: PairRatios | None = None  # the adaptive timing phase's per-pair ratios (k == n)


Judge = Callable[[Comparison, Mapping[str, Any]], RuleResult]
Settler = Callable[[Look, Mapping[str, Any]], RuleSettlement]


@dataclass(frozen=True)
class Rule:
    """One gate rule (module docstring). `order`: its place in the verdict's list (the gate, JUnit, the report);
    `reads`: the runs it reads when it has no `runs` parameter; `passes`: the passes it compares (on runs
    that planned none of them it is skipped as not planned); `unplanned`: another such test (a reason, "":
    planned); `names_rows`: a failure is named with its failing rows (several kinds of row); `finish`: the
    parameters after their defaults are filled in, given the table as written (None: as filled in)."""

    name: str
    order: int
    what: str  # one line: what it checks (docs/gate.md lists it)
    params: Params
    judge: Judge
    settle: Settler | None = None  # None: settles only when every input has run ("full run")
    needs_verified_cache: bool = False
    reads: tuple[str, ...] = ("base", "variant")
    passes: tuple[str, ...] = ()
    unplanned: Callable[[Comparison], str] | None = None
    names_rows: bool = False
    finish: Callable[[Mapping[str, Any], dict[str, Any]], dict[str, Any]] | None = None

    def runs(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        """The runs it reads: its `runs` parameter, else `reads`."""
        runs = params.get("runs")
        return tuple(runs) if "runs" in self.params and isinstance(runs, list | tuple) else self.reads


_REGISTRY: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    """Add a rule to the registry; a name already registered is refused (ValueError)."""
    if rule.name in _REGISTRY:
        raise ValueError(f"a gate rule named {rule.name!r} is already registered")
    _REGISTRY[rule.name] = rule
    return rule


def unregister(name: str) -> None:
    """Remove a rule (a test's toy rule)."""
    _REGISTRY.pop(name, None)


def registered() -> list[Rule]:
    """Every registered rule, in order (eval/gate/registry.py loads the shipped ones)."""
    return sorted(_REGISTRY.values(), key=lambda r: (r.order, r.name))


def rule_named(name: str) -> Rule | None:
    return _REGISTRY.get(name)


# ---------------------------------------------------------------- shared by rules


def runs_named(c: Comparison, names: Sequence[str]) -> list[tuple[str, ScoredRun]]:
    return [(n, c.base if n == "base" else c.variant) for n in names]


def full_run(look: Look, name: str) -> RuleSettlement:
    """The gate's own result once every input has run; open before."""
    result = look.results.get(name)
    state = (result.status if result is not None else OPEN) if look.k == look.n else OPEN
    state = state if state in (SETTLED_PASS, SETTLED_FAIL) else OPEN
    return RuleSettlement(name, state, "full run", "settles only when every input has run")


def count_share(rule: str, equal: int, total: int, look: Look, fraction: float) -> RuleSettlement:
    """A share of N that must be equal: FAIL once it cannot be reached even if every remaining input agrees."""
    need = fraction * look.n - 1e-9
    detail = f"{equal}/{total} equal after {look.k} of {look.n} inputs; needs {fraction:g} of N"
    if equal + (look.n - look.k) < need:
        return RuleSettlement(rule, SETTLED_FAIL, "count", detail + ": cannot be reached any more")
    state = SETTLED_PASS if look.k == look.n and equal >= need else OPEN
    return RuleSettlement(rule, state, "count", detail)


def count_max(rule: str, counts: list[tuple[str, int]], look: Look, p: Mapping[str, Any]) -> RuleSettlement:
    """Per-run counts of final records that must stay <= `max`: FAIL as soon as one is over it."""
    detail = ", ".join(f"{side} {n}" for side, n in counts) + f" after {look.k} of {look.n} inputs"
    if any(n > p["max"] for _, n in counts):
        return RuleSettlement(rule, SETTLED_FAIL, "count", f"{detail}: over max {p['max']}")
    return RuleSettlement(rule, SETTLED_PASS if look.k == look.n else OPEN, "count", detail)
