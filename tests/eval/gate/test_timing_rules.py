"""The timing rules on by default: warm_prefill_change and cold_prefill_change, three-way on an
interleaved session's gated interval, skipped (listed, not blocking) for two sequential runs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze.compare import Change, Comparison, compare
from eval.analyze.score import score_run
from eval.gate.policy import load_policy, parse_policy
from eval.gate.rules import evaluate, rule_cold_prefill_change, rule_warm_prefill_change, until_pct
from eval.gate.verdict import EXIT_FAIL, EXIT_NO_VERDICT, EXIT_PASS, FAIL, NO_DATA, PASS, SKIPPED
from eval.run.ab import AbConfig, execute_ab
from eval.run.config import endpoints
from eval.run.runner import execute_run
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer

DEFAULTS = load_policy(None).rules


def _inputs(tmp_path: Path) -> Path:
    return write_rows(tmp_path / "inputs.jsonl", [make_row(i, words=40 + 9 * i) for i in range(6)])


def _ab(tmp_path: Path, warm_slowdown: float) -> Comparison:
    with FakeServer() as a, FakeServer() as b:
        b.warm_slowdown = warm_slowdown  # only requests with a prefix hit are slower on the variant's server
        ca = config_for(a, _inputs(tmp_path), tmp_path / "runs", variant="base")  # the default passes
        da, db = execute_ab(
            AbConfig(ca, replace(ca, variant="var", topology=endpoints(b.base_url)), seed=5, quiet=True)
        )
    return compare(score_run(da), score_run(db))


@pytest.fixture(scope="module")
def same_speed(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    return _ab(tmp_path_factory.mktemp("aa"), 1.0)


def test_a_warm_path_slowdown_fails_warm_prefill_change_and_passes_its_cold_twin(tmp_path: Path) -> None:
    c = _ab(tmp_path, 1.5)
    assert c.execution == "interleaved"
    warm = rule_warm_prefill_change(c, DEFAULTS["warm_prefill_change"])
    # the fake server's warm prefill is exactly 1.5x on every pair: log ratio log 1.5 on each, no spread
    assert warm.status == FAIL, warm
    assert warm.measured == "+50.0% [97.5% CI +50.0%, +50.0%] over 6 inputs"
    assert warm.threshold == "upper end of the 97.5% CI <= +10%; FAIL when its lower end > +10.0%"
    assert warm.failed_rows == ["warm_prefill_ms"]
    cold = rule_cold_prefill_change(c, DEFAULTS["cold_prefill_change"])  # cold prefill: untouched, ratio 1
    assert cold.status == PASS and cold.measured == "+0.0% [97.5% CI +0.0%, +0.0%] over 6 inputs"
    verdict = evaluate(c, load_policy(None))
    assert verdict.exit_code == EXIT_FAIL and "warm_prefill_change" in verdict.summary


def test_the_same_speed_passes_both_timing_rules_by_default(same_speed: Comparison) -> None:
    c = same_speed
    verdict = evaluate(c, load_policy(None))
    status = {r.rule: r.status for r in verdict.results}
    assert status["warm_prefill_change"] == PASS and status["cold_prefill_change"] == PASS
    assert verdict.exit_code == EXIT_PASS, verdict.summary


def _with(c: Comparison, **changes: tuple[float, float, float]) -> Comparison:
    timing = dict(c.timing_changes)
    for measure, (est, low, high) in changes.items():
        timing[measure] = Change(est, low, high, 6, 1, 0, 0.975)
    return replace(c, timing_changes=timing)


@pytest.mark.parametrize(
    ("interval", "status"),
    [((3.0, -4.0, 10.0), PASS), ((3.0, -4.0, 10.1), NO_DATA), ((25.0, 10.0, 40.0), NO_DATA),
     ((25.0, 10.1, 40.0), FAIL), ((-30.0, -45.0, -15.0), PASS)],
)  # fmt: skip
def test_three_way_at_the_limit(
    same_speed: Comparison, interval: tuple[float, float, float], status: str
) -> None:
    c = _with(same_speed, warm_prefill_ms=interval)
    assert rule_warm_prefill_change(c, DEFAULTS["warm_prefill_change"]).status == status


def test_an_interval_across_the_limit_is_no_verdict_that_only_blocks_a_pass(same_speed: Comparison) -> None:
    c = _with(same_speed, warm_prefill_ms=(8.0, -2.0, 18.0))
    r = rule_warm_prefill_change(c, DEFAULTS["warm_prefill_change"])
    assert r.status == NO_DATA and r.detail == "interval straddles the limit: re-run with --timing-until 2"
    verdict = evaluate(c, load_policy(None))
    assert verdict.exit_code == EXIT_NO_VERDICT
    assert verdict.reasons == [
        "rule warm_prefill_change is undecided: +8.0% [97.5% CI -2.0%, +18.0%] over 6 inputs: interval "
        "straddles the limit: re-run with --timing-until 2"
    ]
    # a FAIL elsewhere (here the cold twin, confidently beyond its limit) still wins
    failing = _with(c, cold_prefill_ms=(30.0, 20.0, 40.0))
    assert evaluate(failing, load_policy(None)).exit_code == EXIT_FAIL


@pytest.mark.parametrize(
    ("estimate", "limit", "pct"),
    [(8.0, 10.0, 2.0), (0.0, 10.0, 5.0), (10.0, 10.0, 0.5), (13.3, 10.0, 3.0), (-40.0, 10.0, 5.0)],
)  # fmt: skip
def test_the_suggested_timing_until(estimate: float, limit: float, pct: float) -> None:
    # min(|limit - estimate|, limit / 2), rounded down to 0.5, at least 0.5
    assert until_pct(estimate, limit) == pct


def test_sequential_runs_skip_the_timing_rules_unless_interleaved_only_is_off(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path)
    with FakeServer() as a, FakeServer() as b:
        b.warm_slowdown = 3.0
        ca = config_for(a, inputs, tmp_path / "runs", variant="base")
        da = execute_run(ca)
        db = execute_run(replace(ca, variant="var", topology=endpoints(b.base_url)))
    c = compare(score_run(da), score_run(db))
    assert c.execution == "sequential"
    for rule in ("warm_prefill_change", "cold_prefill_change"):
        r = {x.rule: x for x in evaluate(c, load_policy(None)).results}[rule]
        assert r.status == SKIPPED and r.threshold.startswith("sequential runs (may be machine drift)")
    assert evaluate(c, load_policy(None)).exit_code == EXIT_PASS  # listed, not blocking
    opted = parse_policy("schema_version = 1\n[rules.warm_prefill_change]\ninterleaved_only = false\n", "p")
    judged = evaluate(c, opted)
    assert judged.results[[r.rule for r in judged.results].index("warm_prefill_change")].status == FAIL


def test_runs_without_timing_passes_skip_the_timing_rules(tmp_path: Path) -> None:
    # like a scenario neither run has: the plan asked no timing, so the default gate of such a session is not
    # blocked by it (a run with timing passes but no /metrics figures is no data: test_gate.py)
    with FakeServer() as a, FakeServer() as b:
        ca = config_for(
            a, _inputs(tmp_path), tmp_path / "runs", variant="base", passes=("cold", "warm", "repeat")
        )
        da, db = execute_ab(
            AbConfig(ca, replace(ca, variant="var", topology=endpoints(b.base_url)), seed=5, quiet=True)
        )
    c = compare(score_run(da), score_run(db))
    assert c.execution == "interleaved"
    r = rule_warm_prefill_change(c, DEFAULTS["warm_prefill_change"])
    assert r.status == SKIPPED and r.threshold == "neither run has timing passes (--passes ... timing)"
    assert evaluate(c, load_policy(None)).exit_code == EXIT_PASS
