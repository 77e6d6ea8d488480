"""The release gate: a comparison + a policy (TOML) -> a verdict, exit 0 / 1 / 2, and JUnit XML.

    0  every checked rule holds
    1  at least one rule fails (each failure names its measured value and threshold)
    2  no verdict: the data cannot support one (missing or incomplete runs, mismatched inputs, too few
       valid pairs, a rule with nothing to measure). Fails closed: missing data never passes.

The rules and their parameters are documented in the shipped default policy, eval/gate/policy_default.toml.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from eval.errors import ConfigError

if TYPE_CHECKING:
    from eval.analyze.compare import Comparison
    from eval.analyze.score import PairStats, ScoredRun

POLICY_SCHEMA_VERSION = 1
DEFAULT_POLICY = "policy_default.toml"
EXIT_PASS, EXIT_FAIL, EXIT_NO_VERDICT = 0, 1, 2

PASS, FAIL, NO_DATA, SKIPPED = "pass", "fail", "no data", "skipped"

# rule -> parameter -> (type, default); `enabled` is implicit
RULE_PARAMS: dict[str, dict[str, tuple[type, Any]]] = {
    "cold_warm_equality": {"allowed_drop": (int, 0)},
    "warm_repeat_equality": {"min_fraction": (float, 1.0)},
    "cold_scores": {"tolerance_points": (float, 0.5)},
    "no_invalid_warm": {
        "max": (int, 0),
        "count_recovered": (bool, True),
        "runs": (list, ["base", "variant"]),
    },
    "no_errors": {"max": (int, 0), "runs": (list, ["base", "variant"])},
    "warm_prefill_change": {"max_change_pct": (float, 5.0)},
    "cross_variant_cold": {"min_fraction": (float, 1.0)},
}
DATA_PARAMS: dict[str, tuple[type, Any]] = {
    "require_complete": (bool, True),
    "min_valid_pair_fraction": (float, 0.9),
    "min_valid_pairs": (int, 1),
}


@dataclass(frozen=True)
class Policy:
    source: str
    data: dict[str, Any]
    rules: dict[str, dict[str, Any]]  # rules present in the file (enabled or not), parameters filled in


@dataclass(frozen=True)
class RuleResult:
    rule: str
    status: str  # pass | fail | no data | skipped
    measured: str
    threshold: str
    detail: str = ""

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

    @property
    def summary(self) -> str:
        if self.exit_code == EXIT_NO_VERDICT:
            return "gate: NO VERDICT (exit 2): " + "; ".join(self.reasons)
        checked = [r for r in self.results if r.status in (PASS, FAIL)]
        failed = [r for r in checked if r.status == FAIL]
        if failed:
            return f"gate: FAIL (exit 1): {len(failed)} of {len(checked)} rules failed: " + ", ".join(
                r.rule for r in failed
            )
        return f"gate: PASS (exit 0): all {len(checked)} rules hold"


# ---------------------------------------------------------------- policy


def _typed(where: str, value: Any, kind: type) -> Any:
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is list:
        if not isinstance(value, list) or not all(v in ("base", "variant") for v in value) or not value:
            raise ConfigError(f'{where}: must be a non-empty list of "base" and/or "variant"')
        return list(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{where}: must be {kind.__name__}, got {value!r}")
    return value


def _params(
    where: str, table: Any, spec: Mapping[str, tuple[type, Any]], extra: Sequence[str] = ()
) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    unknown = sorted(set(table) - set(spec) - set(extra))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(sorted([*spec, *extra]))})")
    return {
        k: _typed(f"{where}.{k}", table[k], kind) if k in table else default
        for k, (kind, default) in spec.items()
    }


def parse_policy(text: str, source: str) -> Policy:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML ({exc})") from None
    unknown = sorted(set(doc) - {"schema_version", "data", "rules"})
    if unknown:
        raise ConfigError(f"{source}: {unknown[0]}: unknown key (known: schema_version, data, rules)")
    if doc.get("schema_version") != POLICY_SCHEMA_VERSION:
        raise ConfigError(
            f"{source}: schema_version must be {POLICY_SCHEMA_VERSION}, got {doc.get('schema_version')!r}"
        )
    data = _params(f"{source}: data", doc.get("data", {}), DATA_PARAMS)
    rules_doc = doc.get("rules", {})
    if not isinstance(rules_doc, dict):
        raise ConfigError(f"{source}: rules must be a table of rule tables")
    rules: dict[str, dict[str, Any]] = {}
    for name, table in rules_doc.items():
        if name not in RULE_PARAMS:
            raise ConfigError(f"{source}: rules.{name}: unknown rule (known: {', '.join(RULE_PARAMS)})")
        params = _params(f"{source}: rules.{name}", table, RULE_PARAMS[name], ["enabled"])
        params["enabled"] = _typed(f"{source}: rules.{name}.enabled", table.get("enabled", True), bool)
        rules[name] = params
    return Policy(source, data, rules)


def load_policy(path: Path | None) -> Policy:
    if path is None:
        text = resources.files("eval.gate").joinpath(DEFAULT_POLICY).read_text(encoding="utf-8")
        return parse_policy(text, f"eval/{DEFAULT_POLICY}")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the policy ({exc.strerror})") from None
    return parse_policy(text, str(path))


# ---------------------------------------------------------------- data sufficiency


def data_reasons(c: Comparison, policy: Policy) -> list[str]:
    """Why the data cannot support a verdict (empty: it can)."""
    reasons = [f"the runs differ in {m.describe()}" for m in c.mismatches]
    for side, run in (("base", c.base), ("variant", c.variant)):
        info = run.scores.run
        if policy.data["require_complete"] and not info.complete:
            reasons.append(
                f"{side} run {info.run_id} is incomplete ({info.n_slots}/{info.expected_records} planned requests have a record)"
            )
        cw = run.scores.agreement.get("cold_warm")
        n = run.scores.n_inputs
        if cw is None:
            reasons.append(f"{side} run {info.run_id} has no cold/warm passes")
            continue
        need = max(policy.data["min_valid_pairs"], policy.data["min_valid_pair_fraction"] * n)
        if cw.n_pairs < need:
            reasons.append(
                f"{side} run {info.run_id} has {cw.n_pairs}/{n} valid cold/warm pairs, needs at least "
                f"{need:g} (data.min_valid_pairs, data.min_valid_pair_fraction)"
            )
    return reasons


# ---------------------------------------------------------------- rules


def _runs(c: Comparison, names: Sequence[str]) -> list[tuple[str, ScoredRun]]:
    return [(n, c.base if n == "base" else c.variant) for n in names]


def rule_cold_warm_equality(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    b, v = c.base.scores.agreement.get("cold_warm"), c.variant.scores.agreement.get("cold_warm")
    name = "cold_warm_equality"
    if b is None or v is None:
        return RuleResult(name, NO_DATA, "no cold/warm pairs", "variant >= base")
    need = b.text_equal - p["allowed_drop"]
    measured = f"variant {v.text_equal}/{v.n_total}, base {b.text_equal}/{b.n_total}"
    threshold = f"variant >= base - {p['allowed_drop']} = {need}"
    return RuleResult(name, PASS if v.text_equal >= need else FAIL, measured, threshold)


def rule_warm_repeat_equality(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    v = c.variant.scores.agreement.get("warm_repeat")
    name = "warm_repeat_equality"
    if v is None or v.n_total == 0:
        return RuleResult(name, NO_DATA, "the variant run has no warm/repeat pairs", "a repeat pass")
    share = v.text_equal / v.n_total
    threshold = f">= {p['min_fraction']:g} of N ({p['min_fraction'] * v.n_total:g}/{v.n_total})"
    detail = "" if share >= p["min_fraction"] else _pair_problems(v.errors, v.invalid, v.missing)
    return RuleResult(
        name,
        PASS if share >= p["min_fraction"] else FAIL,
        f"variant {v.text_equal}/{v.n_total}",
        threshold,
        detail,
    )


def _pair_problems(errors: int, invalid: int, missing: int) -> str:
    parts = [
        f"{n} {what}" for n, what in ((errors, "errored"), (invalid, "invalid"), (missing, "missing")) if n
    ]
    return ("pairs not compared: " + ", ".join(parts)) if parts else ""


def rule_cold_scores(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    name, tol = "cold_scores", p["tolerance_points"]
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
    if missing:
        return RuleResult(name, NO_DATA, "no cold score for " + ", ".join(missing), threshold)
    status = FAIL if failing else PASS
    return RuleResult(
        name,
        status,
        "; ".join(measured),
        threshold,
        ("outside tolerance: " + ", ".join(failing)) if failing else "",
    )


def rule_no_invalid_warm(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    counts = []
    for side, run in _runs(c, p["runs"]):
        inv = run.scores.invalid
        counts.append((side, inv.warm_attempts if p["count_recovered"] else inv.warm_final))
    measured = ", ".join(f"{side} {n}" for side, n in counts)
    what = "invalid warm attempts" if p["count_recovered"] else "warm samples still invalid"
    ok = all(n <= p["max"] for _, n in counts)
    return RuleResult(
        "no_invalid_warm", PASS if ok else FAIL, f"{what}: {measured}", f"<= {p['max']} per run"
    )


def rule_no_errors(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    counts = [(side, run.scores.errors) for side, run in _runs(c, p["runs"])]
    ok = all(n <= p["max"] for _, n in counts)
    measured = "errored requests: " + ", ".join(f"{side} {n}" for side, n in counts)
    return RuleResult("no_errors", PASS if ok else FAIL, measured, f"<= {p['max']} per run")


def rule_warm_prefill_change(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    ch = c.timing_changes.get("warm_prefill_ms")
    name, limit = "warm_prefill_change", p["max_change_pct"]
    threshold = f"upper end of the 95% CI <= {limit:+g}%"
    if ch is None:
        return RuleResult(
            name, NO_DATA, "no paired server prefill times (needs /metrics and timing passes)", threshold
        )
    if not (c.base.scores.timing.valid and c.variant.scores.timing.valid):
        return RuleResult(name, NO_DATA, "timing flagged invalid (concurrency or invalid samples)", threshold)
    measured = f"{ch.estimate:+.1f}% [95% CI {ch.low:+.1f}%, {ch.high:+.1f}%] over {ch.n_inputs} inputs"
    return RuleResult(name, PASS if ch.high <= limit else FAIL, measured, threshold)


def rule_cross_variant_cold(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    s = c.cross_agreement.get("cold")
    name = "cross_variant_cold"
    if s is None or s.n_total == 0:
        return RuleResult(name, NO_DATA, "no cold pass in both runs", "a cold pass")
    threshold = f">= {p['min_fraction']:g} of N ({p['min_fraction'] * s.n_total:g}/{s.n_total})"
    ok = s.text_equal >= p["min_fraction"] * s.n_total - 1e-9
    delta = "n/a" if s.max_delta is None else f"{s.max_delta:.3g}"
    measured = (
        f"base cold vs variant cold outputs equal {s.text_equal}/{s.n_total} "
        f"(token IDs {s.tokens_equal}/{s.n_total}, max top-k logprob |delta| {delta})"
    )
    return RuleResult(name, PASS if ok else FAIL, measured, threshold, "" if ok else _cross_detail(s))


def _cross_detail(s: PairStats) -> str:
    positions = ", ".join(f"{d.dataset}/{d.example_id} @ token {d.position}" for d in s.divergences[:5])
    more = f" and {len(s.divergences) - 5} more" if len(s.divergences) > 5 else ""
    diverging = f"diverging: {positions}{more}" if positions else ""
    problems = _pair_problems(s.errors, s.invalid, s.missing)
    return "; ".join(x for x in (diverging, problems) if x)


RULES: dict[str, Callable[[Comparison, Mapping[str, Any]], RuleResult]] = {
    "cold_warm_equality": rule_cold_warm_equality,
    "warm_repeat_equality": rule_warm_repeat_equality,
    "cold_scores": rule_cold_scores,
    "no_invalid_warm": rule_no_invalid_warm,
    "no_errors": rule_no_errors,
    "warm_prefill_change": rule_warm_prefill_change,
    "cross_variant_cold": rule_cross_variant_cold,
}


def evaluate(c: Comparison, policy: Policy) -> Verdict:
    results = []
    for name, fn in RULES.items():
        params = policy.rules.get(name)
        if params is None:
            results.append(RuleResult(name, SKIPPED, "not checked", "not in the policy"))
        elif not params["enabled"]:
            results.append(RuleResult(name, SKIPPED, "not checked", "disabled in the policy"))
        else:
            results.append(fn(c, params))
    reasons = data_reasons(c, policy)
    reasons += [f"rule {r.rule} has no data: {r.measured}" for r in results if r.status == NO_DATA]
    if not any(r.status in (PASS, FAIL) for r in results) and not reasons:
        reasons.append("the policy checks no rule")
    if reasons:
        return Verdict(EXIT_NO_VERDICT, results, reasons)
    return Verdict(EXIT_FAIL if any(r.status == FAIL for r in results) else EXIT_PASS, results)


def no_verdict(reason: str) -> Verdict:
    return Verdict(EXIT_NO_VERDICT, [], [reason])


# ---------------------------------------------------------------- JUnit


def junit_xml(verdict: Verdict, suite: str) -> bytes:
    """One test case per rule (skipped rules as skipped); a no-verdict adds a `data` case in error."""
    root = ET.Element("testsuites")
    cases = []
    for r in verdict.results:
        case = ET.Element("testcase", classname="lbeval.gate", name=r.rule)
        message = f"measured {r.measured}; threshold {r.threshold}" + (f" ({r.detail})" if r.detail else "")
        if r.status == FAIL:
            ET.SubElement(case, "failure", message=message, type="rule failed").text = message
        elif r.status == NO_DATA:
            ET.SubElement(case, "error", message=message, type="no data").text = message
        elif r.status == SKIPPED:
            ET.SubElement(case, "skipped", message=r.threshold)
        else:
            ET.SubElement(case, "system-out").text = message
        cases.append(case)
    if verdict.exit_code == EXIT_NO_VERDICT:
        case = ET.Element("testcase", classname="lbeval.gate", name="data")
        text = "; ".join(verdict.reasons)
        ET.SubElement(case, "error", message=text, type="no verdict").text = text
        cases.append(case)
    counts = {
        "tests": str(len(cases)),
        "failures": str(sum(c.find("failure") is not None for c in cases)),
        "errors": str(sum(c.find("error") is not None for c in cases)),
        "skipped": str(sum(c.find("skipped") is not None for c in cases)),
    }
    ts = ET.SubElement(root, "testsuite", {"name": suite, **counts})
    ts.extend(cases)
    root.attrib.update(counts)
    text = ET.tostring(root, encoding="unicode")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + text + "\n").encode("utf-8")


def write_junit(path: Path, verdict: Verdict, suite: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(junit_xml(verdict, suite))
