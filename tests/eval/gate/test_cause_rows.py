"""The default gate follows every cause row (cause_rows, relative to the base) and checks cache isolation; a
rule with a denominator of 0 is no data. Runs are made by the runner against the fake server (its faults are
the knobs of tests/support/fake_server.py), then gated with the shipped default policy."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.analyze.causes import CauseRow, RowSide
from eval.analyze.compare import Comparison, compare
from eval.analyze.score import ScoredRun, score_run
from eval.cli import main
from eval.gate.cause_rules import delta_limit, judge_row
from eval.gate.policy import load_policy
from eval.gate.rules import evaluate
from eval.gate.verdict import FAIL, NO_DATA, PASS, SKIPPED, RuleResult, Verdict
from eval.report.console import cause_lines
from eval.run.runner import execute_run
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.batch_hook import announced_batches
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.eval.shipped_policy import SEQUENTIAL, checked_rules
from tests.support.fake_server import BatchEffect, FakeServer, PrefixEffect

WORDS = (40, 47)
ALL = ("cache", "batch", "hitlen", "repeats", "traffic")


def make_run(tmp: Path, variant: str, s: ScenarioSettings, knobs: dict[str, Any]) -> ScoredRun:
    inputs = write_rows(tmp / "inputs.jsonl", [make_row(i, words=w) for i, w in enumerate(WORDS)])
    with FakeServer() as fake:
        for attr, value in knobs.items():
            setattr(fake, attr, value)
        config = config_for(fake, inputs, tmp / "runs", variant=variant, passes=("cold", "warm", "repeat"))
        with announced_batches(fake):
            return score_run(execute_run(replace(config, scenarios=s)))


def result(v: Verdict, rule: str) -> RuleResult:
    return next(r for r in v.results if r.rule == rule)


SCEN = ScenarioSettings(scenarios=ALL, batch_sizes=(1, 2), hit_lengths=(17, 32), repeats=3)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScoredRun]:
    """A clean base, a clean second run, a partial-prefix fault (outputs change after a primed prefix of 32
    tokens only), batch noise of a correct kernel (4e-5 vs the base's 3e-5) and a batch numerics fault (1.5)."""
    tmp = tmp_path_factory.mktemp("cause-rows")
    noise = {"batch_effect": BatchEffect(window_s=None, jitter=3e-5)}
    return {
        "base": make_run(tmp, "base", SCEN, {}),
        "clean": make_run(tmp, "clean", SCEN, {}),
        "partial": make_run(tmp, "partial", SCEN, {"prefix_effect": PrefixEffect(residue=0, position=1)}),
        "noisy_base": make_run(tmp, "noisy_base", SCEN, noise),
        "noisy": make_run(tmp, "noisy", SCEN, {"batch_effect": BatchEffect(window_s=None, jitter=4e-5)}),
        "batch_fault": make_run(tmp, "batch_fault", SCEN, {"batch_effect": BatchEffect(window_s=None, jitter=1.5)}),
    }  # fmt: skip


def _gate(base: ScoredRun, variant: ScoredRun) -> tuple[Comparison, Verdict]:
    c = compare(base, variant)
    return c, evaluate(c, load_policy(None))


def test_clean_vs_clean_passes_on_every_row(runs: dict[str, ScoredRun]) -> None:
    c, v = _gate(runs["base"], runs["clean"])
    r = result(v, "cause_rows")
    assert v.exit_code == 0, v.summary
    assert r.status == PASS and not any(ref.failed for ref in r.rows)
    keys = {ref.row for ref in r.rows}
    # every cause and sub-row of the five scenarios (batch size 2; hit lengths 17 and 32)
    assert {"cache_cold_warm", "cache_warm_repeat", "batch", "batch_b2", "batch_warm", "batch_warm_b2", "hitlen",
            "hitlen_L_17", "hitlen_L_32", "repeats", "repeats_alone", "repeats_batched", "traffic",
            "traffic_vs_cold"} <= keys  # fmt: skip
    assert cause_lines(c, v) == []  # nothing differs: nothing named


def test_a_partial_prefix_fault_fails_naming_the_hitlen_rows(runs: dict[str, ScoredRun]) -> None:
    # hitlen_equality is off by default (equality alone once PASSED "all 6 rules hold" on this fault)
    c, v = _gate(runs["base"], runs["partial"])
    r = result(v, "cause_rows")
    assert result(v, "hitlen_equality").status == SKIPPED
    assert v.exit_code == 1 and r.status == FAIL, v.summary
    failed = {ref.row for ref in r.rows if ref.failed}
    assert failed == {"hitlen", "hitlen_L_32"}, r
    assert (
        "hitlen: tokens equal 2/4 vs base 4/4" in r.detail
        and "hitlen_L_32: tokens equal 0/2 vs base 2/2" in r.detail
    )
    lines = cause_lines(c, v)
    assert any(re.match(r"\s+hitlen_L_32\s+tokens 0/2 vs base 2/2", line) for line in lines), lines
    assert all(len(line) <= 100 for line in lines)


def test_kernel_noise_passes_and_a_numerics_fault_fails_on_the_delta(runs: dict[str, ScoredRun]) -> None:
    _, v = _gate(runs["noisy_base"], runs["noisy"])
    assert result(v, "cause_rows").status == PASS, result(v, "cause_rows")
    _, v = _gate(runs["noisy_base"], runs["batch_fault"])
    r = result(v, "cause_rows")
    assert r.status == FAIL and "batch_b2" in {ref.row for ref in r.rows if ref.failed}, r
    assert re.search(r"batch_b2: max \|delta\| 1\.5 vs base 3(\.\d+)?e-05 \(limit 0\.01\)", r.detail), (
        r.detail
    )


def test_a_row_measured_by_one_run_only_is_no_data_unless_the_policy_skips_it(
    runs: dict[str, ScoredRun], tmp_path: Path
) -> None:
    base = make_run(tmp_path, "cache_only", ScenarioSettings(), {})
    c = compare(base, runs["clean"])
    r = result(evaluate(c, load_policy(None)), "cause_rows")
    assert r.status == NO_DATA and "hitlen_L_32 (measured by the variant run only)" in r.measured, r
    policy = load_policy(None)
    policy = replace(
        policy, rules={**policy.rules, "cause_rows": {**policy.rules["cause_rows"], "skip_one_sided": True}}
    )
    r = result(evaluate(c, policy), "cause_rows")
    assert (
        r.status == PASS
        and "skipped, measured by one run only: batch (measured by the variant run only)" in r.measured
    )


def test_zero_denominators_are_no_data(tmp_path: Path) -> None:
    # --hit-lengths 100000 sends no prime: "honoured 0/0" passed; --batch-sizes 1 forms no batch: 0/0 failed
    s = ScenarioSettings(scenarios=("cache", "batch", "hitlen"), batch_sizes=(1,), hit_lengths=(100000,))
    base, variant = make_run(tmp_path, "b", s, {}), make_run(tmp_path, "v", s, {})
    policy = load_policy(None)
    policy = replace(
        policy,
        rules={**policy.rules, "batch_invariant": {**policy.rules["batch_invariant"], "enabled": True}},
    )
    v = evaluate(compare(base, variant), policy)
    honoured = result(v, "hitlen_cache_honoured")
    assert honoured.status == NO_DATA and "honoured 0/0" in honoured.measured, honoured
    batch = result(v, "batch_invariant")
    assert batch.status == NO_DATA and "batch row has no planned pair (0/0)" in batch.measured, batch
    rows = result(v, "cause_rows")
    assert rows.status == NO_DATA, rows
    assert (
        "batch (no planned pair: 0/0 in both runs)" in rows.measured
        and "hitlen (no planned pair" in rows.measured
    )
    assert v.exit_code == 2


def test_a_fresh_salt_that_hits_is_a_cache_isolation_fault(tmp_path: Path) -> None:
    # what the records hold when the server ignores cache_salt: a cold request sent with a fresh salt finds the
    # blocks an earlier request left (another user's, where salts separate users)
    s = ScenarioSettings()
    base = make_run(tmp_path, "b", s, {})
    variant = make_run(tmp_path, "v", s, {})
    c, v = _gate(base, variant)
    assert result(v, "cache_isolation").status == PASS
    records = Path(variant.loaded.run_dir) / "records.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        obj = json.loads(line)
        if obj["pass_name"] == "cold" and obj["example_id"] == "ex1":
            obj["usage"]["cached_tokens"] = 48  # what verification records: a miss expected, 48 cached
            obj["status"], obj["error"] = "invalid", "expected a prefix-cache miss, but 48 tokens were cached"
            lines[i] = json.dumps(obj) + "\n"
    records.write_text("".join(lines))
    _, v = _gate(base, score_run(Path(variant.loaded.run_dir)))
    r = result(v, "cache_isolation")
    assert r.status == FAIL and v.exit_code == 1
    assert "cache_salt accepted but not honoured: a cache isolation fault" in r.detail
    assert "variant qasper/ex1 cold rep 0: 48 cached" in r.detail


def test_lbeval_gate_names_the_failing_rows_in_its_output_and_junit(
    runs: dict[str, ScoredRun], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junit = tmp_path / "gate.xml"
    base, partial = (str(runs[k].loaded.run_dir) for k in ("base", "partial"))
    capsys.readouterr()
    assert main(["gate", base, partial, "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert all(len(line) <= 100 for line in lines)
    joined = " ".join(out.split())
    checked = checked_rules(*SEQUENTIAL)
    assert f"gate: FAIL (exit 1): 1 of {checked} rules failed: cause_rows [hitlen, hitlen_L_32]" in joined
    assert "causes 2 cause row(s) where the variant differs from the base" in joined
    assert any(line.lstrip().startswith("hitlen_L_32 ") and "FAIL cause_rows" in line for line in lines)
    assert "failing rows: hitlen, hitlen_L_32" in junit.read_text()


POLICY = {"allowed_drop": 0, "delta_factor": 10.0, "delta_floor": 0.01}


@pytest.mark.parametrize(
    ("base", "noise", "limit"),
    [
        (None, 0.0, 0.01),  # no pair in the base: the floor
        (3e-5, 3e-5, 0.01003),  # dense fp32 kernel noise: the floor rules
        (0.005, 0.0, 0.05),  # a noisy row: base x factor
        (0.0, 0.0159, 0.159),  # bf16 batch noise the base measured elsewhere: the engine's own noise x factor
        (0.2, 0.0159, 2.0),
    ],
)
def test_the_delta_limit_reads_the_engines_own_noise(base: float | None, noise: float, limit: float) -> None:
    assert delta_limit(base, POLICY, noise) == pytest.approx(limit)


def test_a_row_the_base_happened_to_batch_alike_is_not_a_fault_on_a_bf16_engine() -> None:
    """Measured on cpu-hybrid (bf16, 2026-12-07): clean against clean, the base's repeats_batched row 0 and the
    variant's 0.0157 (its batches formed otherwise), while the base's batch_warm row measured 0.0159. With the
    engine's noise the row passes; a partial-prefix fault's 0.9 still fails."""
    row = CauseRow("repeats_batched", 1, "repeats", RowSide(2, 2, 2, 0.0), RowSide(2, 2, 2, 0.0157))
    assert judge_row(row, POLICY).worse  # the floor alone (0.01) calls it worse
    assert judge_row(row, POLICY, noise=0.0159).worse == []
    fault = CauseRow("hitlen_1B", 1, "hitlen", RowSide(1, 1, 1, 0.0), RowSide(1, 1, 1, 0.9))
    assert judge_row(fault, POLICY, noise=0.0159).worse
