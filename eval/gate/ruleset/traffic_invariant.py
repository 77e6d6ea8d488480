"""traffic_invariant (optional, off by default): the variant's warm output after unrelated traffic
token-identical to its cold twin on at least `min_fraction` of N. Reads the variant; needs a verified cache
state. Settles only when every input has run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval.analyze.compare import Comparison
from eval.gate.rule import FRACTION, Rule, RuleResult, register
from eval.gate.ruleset._attribution import equality_rule

__all__ = ["RULE"]


def judge(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    return equality_rule(c, "traffic_invariant", ["traffic"], "traffic", p, bitwise=False)


RULE = register(
    Rule("traffic_invariant", 140, "the variant's warm output after unrelated traffic equals the cold one",
         {"min_fraction": (FRACTION, 1.0)}, judge, needs_verified_cache=True, reads=("variant",),
         names_rows=True)
)  # fmt: skip
