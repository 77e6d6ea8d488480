"""warm_repeat_equality: the variant's warm/repeat output equality (text) must be at least `min_fraction` of N
(N/N by default): a warm cache must give the same answer twice. Reads the variant only; needs a verified cache
state. Settles FAIL early (how "count") at the first counted mismatch that leaves fewer equal pairs than
min_fraction x N even if every remaining input agrees; PASS only when every input has run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval.analyze.compare import Comparison
from eval.gate.rule import (
    FAIL,
    FRACTION,
    NO_DATA,
    PASS,
    Look,
    RowRef,
    Rule,
    RuleResult,
    count_share,
    register,
)
from eval.records.stop import RuleSettlement

__all__ = ["RULE"]

NAME = "warm_repeat_equality"


def judge(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    v = c.variant.scores.agreement.get("warm_repeat")
    if v is None or v.n_total == 0:
        return RuleResult(NAME, NO_DATA, "the variant run has no warm/repeat pairs", "a repeat pass")
    share = v.text_equal / v.n_total
    threshold = f">= {p['min_fraction']:g} of N ({p['min_fraction'] * v.n_total:g}/{v.n_total})"
    ok = share >= p["min_fraction"]
    detail = "" if ok else _pair_problems(v.errors, v.invalid, v.missing)
    rows = (RowRef("agreement", "warm_repeat_text", not ok),)
    return RuleResult(
        NAME, PASS if ok else FAIL, f"variant {v.text_equal}/{v.n_total}", threshold, detail, rows
    )


def _pair_problems(errors: int, invalid: int, missing: int) -> str:
    parts = [
        f"{n} {what}" for n, what in ((errors, "errored"), (invalid, "invalid"), (missing, "missing")) if n
    ]
    return ("pairs not compared: " + ", ".join(parts)) if parts else ""


def settle(look: Look, p: Mapping[str, Any]) -> RuleSettlement:
    s = look.c.variant.scores.agreement.get("warm_repeat")
    equal, total = (s.text_equal, s.n_total) if s is not None else (0, 0)
    return count_share(NAME, equal, total, look, p["min_fraction"])


RULE = register(
    Rule(NAME, 20, "the variant's warm/repeat output equality is N/N",
         {"min_fraction": (FRACTION, 1.0)}, judge, settle, needs_verified_cache=True, reads=("variant",),
         passes=("warm", "repeat"))
)  # fmt: skip
