"""A rule that fails on whole, matched, undamaged runs is a FAIL even where the same fault leaves too few valid
cold/warm pairs for a PASS: a server whose every warm hit comes back one block short (the fake's short_hit
fault, the engine fault `short_hits`) makes every warm request invalid, and the gate must name the rule that
caught it (exit 1), not hide the finding behind the no verdict the fault itself causes (exit 2). Damaged,
mismatched or incomplete runs stay no verdict, FAIL or not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze.compare import compare
from eval.analyze.score import ScoredRun, score_run
from eval.gate.policy import load_policy
from eval.gate.rules import evaluate
from eval.gate.verdict import EXIT_FAIL, EXIT_NO_VERDICT, EXIT_PASS, FAIL
from eval.run.runner import execute_run
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer, Fault

CACHE_ONLY = ScenarioSettings(scenarios=("cache",))


def _run(tmp: Path, variant: str, short_hits: bool) -> ScoredRun:
    inputs = write_rows(tmp / "inputs.jsonl", [make_row(i, words=60 + 7 * i) for i in range(3)])
    with FakeServer() as fake:
        if short_hits:
            fake.faults.append(Fault("short_hit", times=-1))
        config = config_for(fake, inputs, tmp / "runs", variant=variant, passes=("cold", "warm", "repeat"))
        return score_run(execute_run(replace(config, scenarios=CACHE_ONLY)))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScoredRun]:
    tmp = tmp_path_factory.mktemp("thin")
    # second runs of each (a run compared with itself is no verdict: "a run always agrees with itself")
    return {
        "base": _run(tmp, "base", False),
        "short": _run(tmp, "short", True),
        "base_again": _run(tmp, "base_again", False),
        "short_again": _run(tmp, "short_again", True),
    }


def test_short_hits_fail_the_gate_on_no_invalid_warm_although_no_warm_pair_is_valid(
    runs: dict[str, ScoredRun],
) -> None:
    c = compare(runs["base"], runs["short"])
    cw = runs["short"].scores.agreement["cold_warm"]
    assert cw.n_pairs == 0  # every warm request found one block fewer than promised: invalid
    v = evaluate(c, load_policy(None))
    assert v.exit_code == EXIT_FAIL, v.summary  # was NO VERDICT: "0/3 valid cold/warm pairs"
    failed = {r.rule for r in v.results if r.status == FAIL}
    assert "no_invalid_warm" in failed
    assert v.reasons == []


def test_a_clean_pair_of_runs_still_passes_and_thin_data_alone_is_no_verdict(
    runs: dict[str, ScoredRun],
) -> None:
    assert evaluate(compare(runs["base"], runs["base_again"]), load_policy(None)).exit_code == EXIT_PASS
    # the short-hit run against another such run, judged by the rules relative to the base only (the absolute ones,
    # no_invalid_warm and warm_repeat_equality, do fail on it): none fails, and 0 valid pairs cannot PASS
    policy = load_policy(None)
    rules = {
        k: v for k, v in policy.rules.items() if k in ("cold_warm_equality", "cold_scores", "cause_rows")
    }
    v = evaluate(compare(runs["short"], runs["short_again"]), replace(policy, rules=rules))
    assert v.exit_code == EXIT_NO_VERDICT and any("valid cold/warm pairs" in r for r in v.reasons), v.summary


def test_an_incomplete_run_is_no_verdict_even_when_a_rule_fails(runs: dict[str, ScoredRun]) -> None:
    short = runs["short"]
    info = replace(short.scores.run, complete=False, n_slots=short.scores.run.n_slots - 1)
    partial = replace(short, scores=replace(short.scores, run=info))
    v = evaluate(compare(runs["base"], partial), load_policy(None))
    assert v.exit_code == EXIT_NO_VERDICT and any("incomplete" in r for r in v.reasons), v.summary
