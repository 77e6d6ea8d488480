"""batch_invariant (optional, off by default): the variant's batch rows (alone vs in a batch of B, every B; with
`include_warm` the warm path too) token-identical on at least `min_fraction` of N and, with `bitwise`, max |top-k
logprob delta| 0 (vLLM's batch-invariant mode). Settles only when every input has run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval.analyze.compare import Comparison
from eval.gate.rule import FRACTION, Rule, RuleResult, register
from eval.gate.ruleset._attribution import equality_rule

__all__ = ["RULE"]


def judge(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    keys = ["batch", "batch_warm"] if p["include_warm"] else ["batch"]
    return equality_rule(c, "batch_invariant", keys, "batch", p, bitwise=p["bitwise"])


RULE = register(
    Rule("batch_invariant", 110, "the variant's outputs do not change with the batch's composition",
         {"min_fraction": (FRACTION, 1.0), "include_warm": (bool, True), "bitwise": (bool, True)}, judge,
         names_rows=True)
)  # fmt: skip
