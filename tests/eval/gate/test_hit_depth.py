"""A fault that perturbs only partial prefix hits deep inside a prompt FAILs the shipped default gate on the
default plan's depth row, and passed it on the plan that sampled one block and the full hit only.

The fake server's prefix effect (tests/support/fake_server.py PrefixEffect, modulus 64, residue 48) makes a request
diverge from its second token when the longest earlier same-salt prompt that is a proper prefix of it has 48
tokens: on these 79-token prompts (block 16: 4 full blocks a whole prompt can hit) that is a hit of 3 blocks,
one block short of the full hit, the deepest partial hit. Nothing else the default plan sends resumes there (the
warm, repeat, batch and traffic requests resend the same prompt, never a proper prefix of it)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze.compare import compare
from eval.analyze.score import ScoredRun, score_run
from eval.commands import run as run_command
from eval.gate.policy import load_policy
from eval.gate.rules import evaluate
from eval.gate.verdict import FAIL, PASS, Verdict
from eval.run.runner import execute_run
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer, PrefixEffect

BLOCK = 16
OLD_CLASSES = ("1B", "last block")  # the default plan's hit classes before it sampled the depths
DEEP_ONLY = PrefixEffect(modulus=64, residue=48, position=1)  # a hit of 48 tokens: 3 of the 4 full blocks


def default_plan() -> ScenarioSettings:
    p = argparse.ArgumentParser()
    run_command.configure(p)
    return run_command.scenario_config(p.parse_args(["--variant", "v", "--inputs", "i"]), {})


def make_run(tmp: Path, variant: str, plan: ScenarioSettings, effect: PrefixEffect | None) -> ScoredRun:
    rows = [make_row(i, dataset=("qasper", "gov_report")[i % 2]) for i in range(4)]
    inputs = write_rows(tmp / "inputs.jsonl", rows)
    with FakeServer(block_size=BLOCK) as server:
        server.prefix_effect = effect
        return score_run(
            execute_run(config_for(server, inputs, tmp / "runs", variant=variant, scenarios=plan))
        )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScoredRun]:
    tmp = tmp_path_factory.mktemp("hit-depth")
    new, old = default_plan(), replace(default_plan(), hit_classes=OLD_CLASSES)
    return {
        "base": make_run(tmp, "base", new, None),
        "clean": make_run(tmp, "clean", new, None),
        "deep": make_run(tmp, "deep", new, DEEP_ONLY),
        "old_base": make_run(tmp, "old_base", old, None),
        "old_deep": make_run(tmp, "old_deep", old, DEEP_ONLY),
    }


def gate(base: ScoredRun, variant: ScoredRun) -> Verdict:
    return evaluate(compare(base, variant), load_policy(None))


def failed_rows(v: Verdict) -> dict[str, set[str]]:
    return {r.rule: {ref.row for ref in r.rows if ref.failed} for r in v.results if r.status == FAIL}


def test_the_default_plan_primes_the_deep_partial_hit() -> None:
    plan = default_plan()
    assert plan.hit_classes is not None and "deepest partial" in plan.hit_classes
    assert "deepest partial" not in OLD_CLASSES


def test_a_deep_only_fault_fails_the_default_gate_on_the_depth_row(runs: dict[str, ScoredRun]) -> None:
    v = gate(runs["base"], runs["deep"])
    assert v.exit_code == 1, v.summary
    # the cause row rule alone, on the hitlen row and its deepest partial sub-row, nowhere else
    assert failed_rows(v) == {"cause_rows": {"hitlen", "hitlen_deepest_partial"}}, v.summary
    rule = next(r for r in v.results if r.rule == "cause_rows")
    assert "hitlen_deepest_partial: tokens equal 0/1 vs base 1/1" in rule.detail, rule.detail


def test_clean_against_clean_passes_the_default_gate_on_the_new_plan(runs: dict[str, ScoredRun]) -> None:
    v = gate(runs["base"], runs["clean"])
    assert v.exit_code == 0 and not failed_rows(v), v.summary
    rows = {ref.row for r in v.results if r.rule == "cause_rows" for ref in r.rows}
    assert {"hitlen_1B", "hitlen_middle", "hitlen_deepest_partial", "hitlen_last_block"} <= rows, rows


def test_the_plan_without_the_depths_passed_the_same_fault(runs: dict[str, ScoredRun]) -> None:
    v = gate(runs["old_base"], runs["old_deep"])
    assert v.exit_code == 0 and not failed_rows(v), v.summary
    rule = next(r for r in v.results if r.rule == "cause_rows")
    assert rule.status == PASS and "hitlen_deepest_partial" not in {ref.row for ref in rule.rows}
