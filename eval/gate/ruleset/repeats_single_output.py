"""repeats_single_output (optional, off by default): at most `max_inputs` inputs whose repeats of the very same
request (alone and in batches) give more than one distinct output, in the variant. Settles only when every input
has run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval.analyze.compare import Comparison
from eval.gate.rule import COUNT, FAIL, NO_DATA, PASS, RowRef, Rule, RuleResult, register
from eval.gate.ruleset._attribution import ATTRIBUTION, measured_row

__all__ = ["RULE"]

NAME = "repeats_single_output"


def judge(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    threshold = f"inputs with more than one distinct output over the repeats <= {p['max_inputs']}"
    r = measured_row(c.variant, "repeats")
    if r is None or r.outputs is None:
        return RuleResult(NAME, NO_DATA, "the variant run has no repeats scenario", threshold)
    o = r.outputs
    if o.n_inputs == 0:
        return RuleResult(NAME, NO_DATA, "no input has two valid repeats", threshold)
    measured = (
        f"variant {o.n_multiple}/{o.n_inputs} inputs with more than one output (at most {o.max_distinct})"
    )
    ok = o.n_multiple <= p["max_inputs"]
    return RuleResult(
        NAME, PASS if ok else FAIL, measured, threshold, rows=(RowRef(ATTRIBUTION, "repeats", not ok),)
    )


RULE = register(
    Rule(NAME, 130, "the variant's repeats of one request give one distinct output",
         {"max_inputs": (COUNT, 0)}, judge)
)  # fmt: skip
