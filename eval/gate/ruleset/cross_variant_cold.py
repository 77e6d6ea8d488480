"""cross_variant_cold: cold numerics across variants, judged against the engine's own noise (the judgement:
eval/gate/cross_numerics.py; docs/gate.md). Per input, base cold vs variant cold within max(noise x
delta_factor, delta_floor) on at least `min_fraction` of N, unless a numerics change is declared (by the policy's
`numerics` or the variant's launch spec: then it passes, naming who declared it). Settles only when every input
has run: its limit is the base's own noise, which the remaining inputs' rows may still raise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval.analyze.agreement import PairStats
from eval.analyze.compare import Comparison
from eval.errors import ConfigError
from eval.gate.cross_numerics import (
    BaseNoise,
    Declaration,
    Judgement,
    base_noise,
    input_pairs,
    judge,
    run_declaration,
)
from eval.gate.rule import (
    DELTA,
    FACTOR,
    FAIL,
    FRACTION,
    NO_DATA,
    PASS,
    RowRef,
    Rule,
    RuleResult,
    Text,
    register,
)
from eval.serve.numerics import declared_reason, numerics_problem

__all__ = ["DECLARATION", "RULE", "rule_cross_variant_cold"]

NAME = "cross_variant_cold"
CROSS_ROW = RowRef("cross", "cross_cold_text")
SHOWN = 5  # inputs named in a failure's detail
# a declared numerics change, `numerics = "changed: REASON"` ("" none; eval/serve/numerics.py)
DECLARATION = Text(str, numerics_problem)


def declarations(c: Comparison, p: Mapping[str, Any]) -> list[Declaration]:
    """The policy's declaration, then each run's (ConfigError: one is malformed or ambiguous)."""
    out = []
    policy = declared_reason(p.get("numerics", ""), f"rules.{NAME}.numerics")
    if policy:
        out.append(Declaration("the policy", policy))
    for side, run in (("base", c.base), ("variant", c.variant)):
        found = run_declaration(side, run)
        if found is not None:
            out.append(found)
    return out


# ---------------------------------------------------------------- the rule


def _measured(s: PairStats, j: Judgement, noise: BaseNoise) -> str:
    delta = "n/a" if s.max_delta is None else f"{s.max_delta:.3g}"
    where = (
        f"base noise {noise.max_delta:.3g} ({noise.row})"
        if noise.row
        else "the base measured no batch, repeats or replica row: the floor alone"
    )
    return (
        f"base cold vs variant cold within the base's own noise on {j.within}/{j.n_total} inputs "
        f"(token IDs equal {s.tokens_equal}/{s.n_total}, max top-k logprob |delta| {delta}; {where})"
    )


def _threshold(p: Mapping[str, Any], j: Judgement) -> str:
    need = p["min_fraction"] * j.n_total
    return (
        f">= {p['min_fraction']:g} of N ({need:g}/{j.n_total}) inputs with equal token IDs and max |delta| <= "
        f"max(base noise x {p['delta_factor']:g}, {p['delta_floor']:g}) = {j.limit:.3g}, unless declared"
    )


def _detail(s: PairStats, j: Judgement, noise: BaseNoise) -> str:
    named = ", ".join(f"{name} {why}" for name, why in j.outside[:SHOWN])
    more = f" and {len(j.outside) - SHOWN} more" if len(j.outside) > SHOWN else ""
    parts = [f"outside: {named}{more}"] if named else []
    lost = [
        f"{n} {w}" for n, w in ((s.errors, "errored"), (s.invalid, "invalid"), (s.missing, "missing")) if n
    ]
    if lost:
        parts.append("pairs not compared: " + ", ".join(lost))
    return "; ".join(parts)


def _declared(s: PairStats, found: Sequence[Declaration]) -> RuleResult:
    said = "; ".join(f'{d.by}: "{d.reason}"' for d in found)
    delta = "n/a" if s.max_delta is None else f"{s.max_delta:.3g}"
    measured = (
        f"numerics changed on purpose, declared by {said} (not judged: token IDs equal "
        f"{s.tokens_equal}/{s.n_total}, max top-k logprob |delta| {delta})"
    )
    return RuleResult(
        NAME, PASS, measured, "a declared numerics change is named, not judged", rows=(CROSS_ROW,)
    )


def rule_cross_variant_cold(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    s = c.cross_agreement.get("cold")
    if s is None or s.n_total == 0:
        return RuleResult(NAME, NO_DATA, "no cold pass in both runs", "a cold pass")
    try:
        found = declarations(c, p)
    except ConfigError as exc:
        return RuleResult(
            NAME, NO_DATA, f"a declared numerics change cannot be read: {exc}", "a readable one"
        )
    if found:
        return _declared(s, found)
    noise = base_noise(c.base.scores.attribution)
    j = judge(input_pairs(c), s.n_total, noise, p)
    ok = j.within >= p["min_fraction"] * j.n_total - 1e-9
    detail = "" if ok else _detail(s, j, noise)
    rows = (RowRef(CROSS_ROW.table, CROSS_ROW.row, not ok),)
    return RuleResult(NAME, PASS if ok else FAIL, _measured(s, j, noise), _threshold(p, j), detail, rows)


RULE = register(
    Rule(NAME, 90, "the variant's cold outputs within the base's own noise, unless a numerics change is declared",
         {"min_fraction": (FRACTION, 1.0), "delta_factor": (FACTOR, 10.0), "delta_floor": (DELTA, 0.01),
          "numerics": (DECLARATION, "")}, rule_cross_variant_cold, passes=("cold",))
)  # fmt: skip
