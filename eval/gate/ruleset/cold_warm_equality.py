"""cold_warm_equality: the variant's cold/warm output equality (text, k/N) must not drop below the base's by more
than `allowed_drop`. Needs a verified cache state (its warm pass is a cache state). Settles early (how "count"):
FAIL when the variant cannot catch up even if it agrees on every remaining input and the base on none, PASS when
it stays ahead even if the reverse happens."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval.analyze.compare import Comparison
from eval.gate.rule import COUNT, FAIL, NO_DATA, PASS, Look, RowRef, Rule, RuleResult, register
from eval.records.stop import OPEN, SETTLED_FAIL, SETTLED_PASS, RuleSettlement

__all__ = ["RULE"]

NAME = "cold_warm_equality"


def judge(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    b, v = c.base.scores.agreement.get("cold_warm"), c.variant.scores.agreement.get("cold_warm")
    if b is None or v is None:
        return RuleResult(NAME, NO_DATA, "no cold/warm pairs", "variant >= base")
    need = b.text_equal - p["allowed_drop"]
    measured = f"variant {v.text_equal}/{v.n_total}, base {b.text_equal}/{b.n_total}"
    threshold = f"variant >= base - {p['allowed_drop']} = {need}"
    ok = v.text_equal >= need
    rows = (RowRef("agreement", "cold_warm_text", not ok),)
    return RuleResult(NAME, PASS if ok else FAIL, measured, threshold, rows=rows)


def settle(look: Look, p: Mapping[str, Any]) -> RuleSettlement:
    b, v = look.c.base.scores.agreement.get("cold_warm"), look.c.variant.scores.agreement.get("cold_warm")
    left, drop = look.n - look.k, p["allowed_drop"]
    if b is None or v is None:
        return RuleSettlement(NAME, OPEN, "count", "no cold/warm pairs")
    detail = f"variant {v.text_equal}, base {b.text_equal} equal after {look.k} of {look.n} inputs"
    if v.text_equal + left < b.text_equal - drop:
        return RuleSettlement(NAME, SETTLED_FAIL, "count", detail + ": the variant cannot catch up")
    if v.text_equal >= b.text_equal + left - drop:
        return RuleSettlement(NAME, SETTLED_PASS, "count", detail)
    return RuleSettlement(NAME, OPEN, "count", detail)


RULE = register(
    Rule(NAME, 10, "the variant's cold/warm output equality does not drop below the base's",
         {"allowed_drop": (COUNT, 0)}, judge, settle, needs_verified_cache=True, passes=("cold", "warm"))
)  # fmt: skip
