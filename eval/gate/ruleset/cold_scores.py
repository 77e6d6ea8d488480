"""cold_scores: per dataset, the variant's official cold score within `tolerance_points` of the base's (0-100
scale), unless the cold outputs are identical across the two variants on every input of that dataset. Settles
only when every input has run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval.analyze.compare import Comparison
from eval.gate.rule import FAIL, NO_DATA, PASS, POINTS, RowRef, Rule, RuleResult, register

__all__ = ["RULE"]

NAME = "cold_scores"


def judge(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    tol = p["tolerance_points"]
    acc_v = {a.dataset: a for a in c.variant.scores.accuracy}
    cross = {x.dataset: x for x in c.cross}
    measured, failing, missing = [], [], []
    for b in c.base.scores.accuracy:
        x = cross[b.dataset]
        if x.n_total and x.text_equal == x.n_total:
            measured.append(f"{b.dataset} cold outputs identical {x.text_equal}/{x.n_total}")
            continue
        bs = b.passes.get("cold")
        vs = acc_v[b.dataset].passes.get("cold") if b.dataset in acc_v else None
        if bs is None or vs is None or bs.score is None or vs.score is None:
            missing.append(b.dataset)
            continue
        diff = vs.score - bs.score
        measured.append(f"{b.dataset} {vs.score:.2f} vs base {bs.score:.2f} ({diff:+.2f})")
        if abs(diff) > tol + 1e-9:
            failing.append(b.dataset)
    threshold = f"|variant - base| <= {tol:g} points per dataset, or identical cold outputs"
    rows = tuple(RowRef("accuracy", b.dataset, b.dataset in failing) for b in c.base.scores.accuracy)
    if missing:
        return RuleResult(NAME, NO_DATA, "no cold score for " + ", ".join(missing), threshold, rows=rows)
    detail = ("outside tolerance: " + ", ".join(failing)) if failing else ""
    return RuleResult(NAME, FAIL if failing else PASS, "; ".join(measured), threshold, detail, rows)


RULE = register(
    Rule(NAME, 30, "per dataset, the variant's cold score within tolerance of the base's",
         {"tolerance_points": (POINTS, 0.5)}, judge, passes=("cold",))
)  # fmt: skip
