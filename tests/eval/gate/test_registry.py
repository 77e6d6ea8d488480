"""A gate rule is one registered object (eval/gate/rule.py, eval/gate/ruleset/): a toy rule registered here, with
no other edit, is checked by the policy, judged by the gate, listed in JUnit, the banner and `lbeval gate`'s
lines; a name is registered once; the one verdict fold (eval/gate/verdict.fold) and the one evaluation per gate
(eval/gate/rules.evaluation) are what the gate, the stop check and the gate on a stopped session read."""

from __future__ import annotations

import pkgutil
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import tomllib

from eval.analyze.compare import Comparison, compare
from eval.analyze.score import score_run
from eval.errors import ConfigError
from eval.gate import rules as rules_module
from eval.gate import ruleset
from eval.gate import settle as settle_module
from eval.gate.junit import junit_xml
from eval.gate.policy import load_policy, parse_policy
from eval.gate.registry import RULESET, listing, rule, rules
from eval.gate.rule import COUNT, FAIL, NO_DATA, PASS, SKIPPED, RowRef, Rule, RuleResult, register, unregister
from eval.gate.rules import evaluate
from eval.gate.verdict import EXIT_FAIL, EXIT_NO_VERDICT, EXIT_PASS, fold
from eval.records.stop import SETTLED_FAIL
from eval.report.banner import banner
from eval.report.console import gate_lines
from tests.eval.gate.test_gate_attacks import _forge_stop
from tests.eval.runfactory import base_and_variant, write_run

ROOT = Path(__file__).resolve().parents[3]
TOY = "toy_errored_variant"


def _toy_judge(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    n = c.variant.scores.errors
    ok = n <= p["max"]
    rows = (RowRef("cache", "errors", not ok), RowRef("cache", "control_salt_ok", not ok))
    return RuleResult(TOY, PASS if ok else FAIL, f"variant {n}", f"<= {p['max']}", rows=rows)


@pytest.fixture
def toy() -> Iterator[Rule]:
    """A rule defined and registered here only: nothing else in eval/ names it."""
    registered = register(
        Rule(TOY, 1000, "a toy: errored variant requests", {"max": (COUNT, 0)}, _toy_judge, names_rows=True)
    )
    yield registered
    unregister(TOY)
    assert rule(TOY) is None


@pytest.fixture
def comparison(tmp_path: Path) -> Comparison:
    base, variant = base_and_variant(tmp_path, errors={("qas01", "control_salt", 0)})
    runs = tmp_path / "runs"
    return compare(score_run(write_run(runs, base)), score_run(write_run(runs, variant)))


def _with_toy(enabled: str = "true") -> str:
    shipped = (ROOT / "eval/gate/policy_default.toml").read_text(encoding="utf-8")
    return shipped + f"\n[rules.{TOY}]\nenabled = {enabled}\nmax = 0\n"


def test_a_name_is_registered_once() -> None:
    shipped = rule("no_errors")
    assert shipped is not None
    with pytest.raises(ValueError, match="'no_errors' is already registered"):
        register(shipped)
    assert rule("no_errors") is shipped


def test_a_toy_rule_is_checked_by_the_policy_from_its_module_alone(toy: Rule) -> None:
    policy = parse_policy(_with_toy(), "p.toml")
    assert policy.rules[TOY] == {"max": 0, "enabled": True}
    for table, problem in (("maxx = 1", "maxx: unknown key (known: enabled, max)"),
                           ("max = -1", "max: must be a count >= 0, got -1")):  # fmt: skip
        with pytest.raises(ConfigError, match=re.escape(f"p.toml: rules.{TOY}.{problem}")):
            parse_policy(f"schema_version = 1\n[rules.{TOY}]\n{table}\n", "p.toml")
    unregister(TOY)
    with pytest.raises(ConfigError, match=f"rules.{TOY}: unknown rule"):
        parse_policy(_with_toy(), "p.toml")
    register(toy)


def test_a_toy_rule_is_judged_and_listed_by_junit_the_banner_and_the_gate_lines(
    toy: Rule, comparison: Comparison
) -> None:
    verdict = evaluate(comparison, parse_policy(_with_toy(), "p.toml"))
    result = next(r for r in verdict.results if r.rule == TOY)
    assert (result.status, result.measured) == (FAIL, "variant 1")  # the one errored control request
    assert verdict.results[-1] is result  # its order (1000) puts it last
    assert verdict.exit_code == EXIT_FAIL
    # names_rows: the summary, the banner and the gate lines name its failing rows
    assert f"{TOY} [errors, control_salt_ok]" in verdict.summary
    assert f"{TOY} [errors, control_salt_ok]" in banner(verdict).headline
    assert any(line.strip().startswith(f"FAIL     {TOY}: measured variant 1") for line in gate_lines(verdict))
    suite = ET.fromstring(junit_xml(verdict, "s")).find("testsuite")
    assert suite is not None
    case = next(c for c in suite.findall("testcase") if c.get("name") == TOY)
    failure = case.find("failure")
    assert failure is not None and "failing rows: errors, control_salt_ok" in (failure.get("message") or "")
    # not in a policy: listed as skipped; disabled: skipped too
    for text, why in ((None, "not in the policy"), (_with_toy("false"), "disabled in the policy")):
        policy = load_policy(None) if text is None else parse_policy(text, "p.toml")
        skipped = next(r for r in evaluate(comparison, policy).results if r.rule == TOY)
        assert (skipped.status, skipped.threshold) == (SKIPPED, why)


def test_every_registered_rule_has_a_table_in_the_shipped_policy_and_a_line_in_the_listing() -> None:
    names = [r.name for r in rules()]
    assert len(names) == len(set(names))
    # every module of the ruleset folder registers a rule, and every registered rule has its shipped table: a
    # module that disappears leaves a table of an unknown rule, a table that disappears leaves a rule unlisted
    modules = {
        f"{RULESET}.{m.name}" for m in pkgutil.iter_modules(ruleset.__path__) if not m.name.startswith("_")
    }
    assert {r.judge.__module__ for r in rules()} == modules
    shipped = tomllib.loads((ROOT / "eval/gate/policy_default.toml").read_text(encoding="utf-8"))
    assert set(shipped["rules"]) == set(names)
    # `python -m eval.gate.registry` (docs/gate.md): each rule with the module that judges it, in order
    listed = [line.split()[0] for line in listing()]
    assert listed == names
    assert listing()[names.index("no_errors")].endswith("(eval.gate.ruleset.no_errors)")


# ---------------------------------------------------------------- the one fold


@pytest.mark.parametrize(
    ("statuses", "blocking", "thin", "missing", "expected"),
    [
        ([FAIL, PASS], ["damaged"], [], [], (EXIT_NO_VERDICT, ["damaged"])),  # damaged data: no verdict
        ([FAIL, NO_DATA], [], ["thin"], ["rule x has no data"], (EXIT_FAIL, [])),  # a FAIL beats thin data
        ([PASS], [], ["thin"], [], (EXIT_NO_VERDICT, ["thin"])),  # thin data blocks a PASS
        ([PASS, NO_DATA], [], [], ["rule x has no data"], (EXIT_NO_VERDICT, ["rule x has no data"])),
        ([SKIPPED], [], [], [], (EXIT_NO_VERDICT, ["the policy checks no rule"])),
        ([PASS, SKIPPED], [], [], [], (EXIT_PASS, [])),
    ],
)
def test_the_verdict_fold(
    statuses: list[str],
    blocking: list[str],
    thin: list[str],
    missing: list[str],
    expected: tuple[int, list[str]],
) -> None:
    assert fold(statuses, blocking, thin, missing) == expected


def _count_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of the gate's evaluations and of blocking_reasons from now on."""
    calls = {"blocking": 0, "evaluation": 0}
    real_blocking, real_evaluation = rules_module.blocking_reasons, rules_module.evaluation

    def blocking(*args: Any) -> list[str]:
        calls["blocking"] += 1
        return real_blocking(*args)

    def evaluation(*args: Any) -> rules_module.Evaluation:
        calls["evaluation"] += 1
        return real_evaluation(*args)

    monkeypatch.setattr(rules_module, "blocking_reasons", blocking)
    monkeypatch.setattr(settle_module, "evaluation", evaluation)
    return calls


def test_the_stop_check_evaluates_once_per_look(
    comparison: Comparison, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_calls(monkeypatch)
    settlement = settle_module.settle(comparison, load_policy(None), 6, 6)
    assert calls == {"blocking": 1, "evaluation": 1}
    assert settlement.settled and settlement.decision == SETTLED_FAIL


def test_the_gate_on_a_stopped_session_evaluates_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopped session's gate settles and judges on one evaluation (it ran evaluate twice and blocking_reasons
    three times)."""
    base, variant = base_and_variant(tmp_path)
    runs = tmp_path / "runs"
    base_dir, variant_dir = write_run(runs, base), write_run(runs, variant)
    _forge_stop(base_dir, variant_dir, 3)  # a stop record after 3 of 6 inputs (its plan does not match)
    calls = _count_calls(monkeypatch)
    result = settle_module.compare_and_gate(
        score_run(base_dir), score_run(variant_dir), load_policy(None), allow_mismatch=False, seed=0
    )
    assert calls == {"blocking": 1, "evaluation": 1}
    assert result.verdict.exit_code == EXIT_NO_VERDICT and result.verdict.stopped
    assert any("the stop record plans 3 inputs" in r for r in result.verdict.reasons)
