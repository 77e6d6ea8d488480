"""The release gate: a comparison + a policy -> a verdict, exit 0 / 1 / 2.

    0  every checked rule holds
    1  at least one rule fails (each failure names its measured value and threshold)
    2  no verdict: the data cannot support one (missing, damaged or incomplete runs, mismatched inputs, too few
       valid pairs, a rule with nothing to measure). Fails closed: missing data never passes.

Every registered rule (eval/gate/ruleset/, one module each) is judged once (`evaluation`) and the results and
the data's reasons are folded into the verdict by eval/gate/verdict.fold. The rules and their parameters are
documented in the shipped default policy, eval/gate/policy_default.toml.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eval.analyze.compare import Comparison
from eval.gate import cache_state
from eval.gate.policy import Policy
from eval.gate.registry import rules
from eval.gate.rule import NO_DATA, SKIPPED, Rule, RuleResult
from eval.gate.ruleset.timing import rule_cold_prefill_change, rule_warm_prefill_change, until_pct
from eval.gate.verdict import Verdict, fold, no_data_reason

__all__ = [
    "NO_DATA", "Evaluation", "blocking_reasons", "data_reasons", "evaluate", "evaluation", "judge_rule",
    "not_planned", "rule_cold_prefill_change", "rule_warm_prefill_change", "same_run", "thin_reasons",
    "unplanned_passes", "until_pct",
]  # fmt: skip


def data_reasons(c: Comparison, policy: Policy) -> list[str]:
    """Why the data cannot support a verdict (empty: it can): `blocking_reasons`, then `thin_reasons`."""
    return blocking_reasons(c, policy) + thin_reasons(c, policy)


def blocking_reasons(c: Comparison, policy: Policy) -> list[str]:
    """Why no figure of the two runs can be trusted: they asked different things, a run is damaged or (with
    data.require_complete) incomplete. Then there is no verdict, whatever the rules say."""
    reasons = [f"the runs differ in {m.describe()}" for m in c.mismatches] + same_run(c)
    for side, run in (("base", c.base), ("variant", c.variant)):
        info = run.scores.run
        # damaged records never pass, whatever the policy says about incomplete runs
        reasons += [f"{side} run {info.run_id} is damaged: {d}" for d in info.damage]
        if policy.data["require_complete"] and not info.complete and not info.damage:
            reasons.append(
                f"{side} run {info.run_id} is incomplete ({info.n_slots}/{info.expected_records} planned requests have a record)"
            )
    return reasons


def same_run(c: Comparison) -> list[str]:
    """A run compared with itself (`lbeval gate main main`: one run folder on both sides, or a copy of it: the
    same variant and run id) agrees with itself on every rule: its PASS would say nothing about a variant."""
    a, b = c.base.scores.run, c.variant.scores.run
    one_folder = c.base.loaded.run_dir.resolve() == c.variant.loaded.run_dir.resolve()
    if not (one_folder or (a.variant, a.run_id) == (b.variant, b.run_id)):
        return []
    where = f"folder {c.base.loaded.run_dir}" if one_folder else f"variant {a.variant}, run id {a.run_id}"
    return [f"base and variant are the same run ({where}): a run always agrees with itself; compare two runs"]


def thin_reasons(c: Comparison, policy: Policy) -> list[str]:
    """Why the whole, matched, undamaged runs are too thin to PASS: too few valid cold/warm pairs (a fault that
    makes warm requests invalid does that). They stop a PASS, not a FAIL measured on the same runs."""
    reasons: list[str] = []
    for side, run in (("base", c.base), ("variant", c.variant)):
        info = run.scores.run
        cw = run.scores.agreement.get("cold_warm")
        n = run.scores.n_inputs
        if cw is None:
            if not unplanned_passes(c, ("cold", "warm")):  # neither run planned them: nothing is missing
                reasons.append(f"{side} run {info.run_id} has no cold/warm passes")
            continue
        need = max(policy.data["min_valid_pairs"], policy.data["min_valid_pair_fraction"] * n)
        if cw.n_pairs < need:
            reasons.append(
                f"{side} run {info.run_id} has {cw.n_pairs}/{n} valid cold/warm pairs, needs at least "
                f"{need:g} (data.min_valid_pairs, data.min_valid_pair_fraction)"
            )
    return reasons


def unplanned_passes(c: Comparison, passes: Sequence[str]) -> list[str]:
    """The passes of `passes` that neither run planned (`--passes`); one run's plan is not the other's missing
    data, so a pass only one run planned is not in the list (the rule then has no data: no verdict)."""
    return [p for p in passes if not any(p in run.scores.run.passes for run in (c.base, c.variant))]


def not_planned(c: Comparison, rule: Rule, r: RuleResult) -> RuleResult:
    """A rule with no data because neither run planned what it compares (Rule.passes, Rule.unplanned: an
    interleaved `--passes timing` session has no cold, warm or repeat pass, and no cause row): skipped as not
    planned, so the verdict judges what was planned instead of giving no verdict for data nobody asked for."""
    if r.status != NO_DATA:
        return r
    missing = unplanned_passes(c, rule.passes)
    if missing:
        what = " and ".join(missing) + (" passes" if len(missing) > 1 else " pass")
        return RuleResult(r.rule, SKIPPED, "not checked", f"not planned: neither run planned the {what}")
    why = rule.unplanned(c) if rule.unplanned is not None else ""
    return RuleResult(r.rule, SKIPPED, "not checked", why) if why else r


def judge_rule(c: Comparison, policy: Policy, rule: Rule) -> RuleResult:
    """One rule's result under the policy: skipped when the policy leaves it out or disables it; no data when it
    needs a verified cache state a run lacks (eval/gate/cache_state.py); skipped when nothing it compares was
    planned."""
    params = policy.rules.get(rule.name)
    if params is None:
        return RuleResult(rule.name, SKIPPED, "not checked", "not in the policy")
    if not params["enabled"]:
        return RuleResult(rule.name, SKIPPED, "not checked", "disabled in the policy")
    result = cache_state.guarded(rule, c, params, policy.data["accept_unverified_cache"])
    return not_planned(c, rule, result)


@dataclass(frozen=True)
class Evaluation:
    """Every registered rule's result and the data's reasons, computed once per comparison and policy (the
    gate, the stop check and the gate on a stopped session read the same one)."""

    results: list[RuleResult]
    blocking: list[str]  # blocking_reasons
    thin: list[str]  # thin_reasons
    policy: str  # the policy's source

    @property
    def verdict(self) -> Verdict:
        statuses = [r.status for r in self.results]
        missing = [no_data_reason(r) for r in self.results if r.status == NO_DATA]
        code, reasons = fold(statuses, self.blocking, self.thin, missing)
        return Verdict(code, self.results, reasons, self.policy)


def evaluation(c: Comparison, policy: Policy) -> Evaluation:
    results = [judge_rule(c, policy, rule) for rule in rules()]
    return Evaluation(results, blocking_reasons(c, policy), thin_reasons(c, policy), policy.source)


def evaluate(c: Comparison, policy: Policy) -> Verdict:
    """The gate's verdict on the comparison under the policy."""
    return evaluation(c, policy).verdict
