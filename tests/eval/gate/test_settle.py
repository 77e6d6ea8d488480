"""eval/gate/settle.py: the timing rule's confidence sequence settles early, and the gate on a stopped session
recomputes the decisions (no verdict when they do not reproduce or the stop record is missing or damaged)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze.aa_floor import aa_floor
from eval.analyze.compare import BOOTSTRAP_SEED, compare
from eval.analyze.score import score_run
from eval.cli import main
from eval.gate.policy import parse_policy
from eval.gate.settle import settle, stop_check
from eval.records.run_folder import RECORDS_NAME, scan_records
from eval.records.stop import SETTLED_FAIL, SETTLED_PASS, read_stop, stop_path, write_stop
from eval.run.ab import AbConfig, execute_ab
from eval.run.config import endpoints
from tests.eval.aa_factory import inputs_file, session
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer

TIMING_POLICY = """schema_version = 1
[rules.warm_prefill_change]
enabled = true
max_change_pct = 5.0
"""
N = 40


def _session(a: FakeServer, b: FakeServer, tmp_path: Path) -> tuple[Path, Path]:
    rows = [make_row(i, words=40 + 3 * i) for i in range(N)]  # prompt lengths differ per input
    inputs = write_rows(tmp_path / "inputs.jsonl", rows)
    (tmp_path / "policy.toml").write_text(TIMING_POLICY)
    policy = parse_policy(TIMING_POLICY, str(tmp_path / "policy.toml"))
    ca = config_for(a, inputs, tmp_path / "runs", variant="base", passes=("cold", "warm", "timing"))
    cb = replace(ca, variant="var", topology=endpoints(b.base_url))
    return execute_ab(AbConfig(ca, cb, seed=3, quiet=True, stop_check=stop_check(policy)))


def _golden_cs(da: Path, db: Path, order: tuple[tuple[str, str], ...]) -> tuple[float, float]:
    """The asymptotic CS after the last input, by the closed form of scorers/sequential.py's docstring:
    mean +- sd_t sqrt(2 (t rho2 + 1) / (t^2 rho2) log(sqrt(t rho2 + 1) / alpha)), rho2 = (c + log(1 + c)) / N,
    c = -2 log alpha, alpha = 0.05, on per-input means of log(variant / base) warm server prefill."""
    prefill = []
    for d in (da, db):
        prefill.append({(r.example_id, r.repetition): r.server_metrics["prefill_time_s"]
                        for r in scan_records(d / RECORDS_NAME).records
                        if r.pass_name == "timing_warm" and r.status == "ok"})  # fmt: skip
    x = []
    for _, ex in order:
        logs = [math.log(prefill[1][(ex, r)] / prefill[0][(ex, r)]) for r in (0, 1)]
        x.append(sum(logs) / 2)
    t = len(x)
    mean = sum(x) / t
    sd = math.sqrt(sum((v - mean) ** 2 for v in x) / (t - 1))
    c = -2 * math.log(0.05)
    rho2 = (c + math.log(1 + c)) / N
    r = sd * math.sqrt(2 * (t * rho2 + 1) / (t**2 * rho2) * math.log(math.sqrt(t * rho2 + 1) / 0.05))
    return 100 * math.expm1(mean - r), 100 * math.expm1(mean + r)


def test_timing_2x_slower_variant_stops_fail_early_on_the_cs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the variant's prefill is twice as slow, and its smaller blocks leave another uncached tail per input,
    # so the per-input ratio varies (the CS has a width)
    with FakeServer() as a, FakeServer(block_size=8) as b:
        b.slowdown = 2.0
        da, db = _session(a, b, tmp_path)
    stop = read_stop(da)
    assert stop is not None and stop.decision == SETTLED_FAIL and 10 <= stop.inputs_run < N  # min_n 10
    (rule,) = stop.rules
    assert rule.rule == "warm_prefill_change" and rule.how == "cs" and rule.state == SETTLED_FAIL
    low, high = _golden_cs(da, db, stop.inputs)
    assert rule.low_pct == pytest.approx(low, abs=1e-6) and rule.high_pct == pytest.approx(high, abs=1e-6)
    assert 5.0 < low < high  # the whole interval above the limit
    capsys.readouterr()
    assert main(["gate", str(da), str(db), "--policy", str(tmp_path / "policy.toml")]) == 1
    assert f"stopped after {stop.inputs_run} of 40 inputs" in capsys.readouterr().out


def test_timing_equal_variant_stops_pass_early(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeServer() as a, FakeServer() as b:
        da, db = _session(a, b, tmp_path)
    stop = read_stop(da)
    assert stop is not None and stop.decision == SETTLED_PASS and stop.inputs_run == 10
    (rule,) = stop.rules
    assert rule.high_pct is not None and abs(rule.high_pct) < 1e-6  # the same prefill times on both sides
    capsys.readouterr()
    assert main(["gate", str(da), str(db), "--policy", str(tmp_path / "policy.toml")]) == 0
    out = capsys.readouterr().out
    assert "PASS     warm_prefill_change" in out and "stopped after 10 of 40 inputs" in out
    # the gate recomputes the decision: a stop record that says otherwise (with a valid digest) is no verdict
    for d in (da, db):
        write_stop(d, replace(stop, decision=SETTLED_FAIL))
    assert main(["gate", str(da), str(db), "--policy", str(tmp_path / "policy.toml")]) == 2
    assert "does not reproduce" in " ".join(capsys.readouterr().out.split())
    # a damaged stop record, then a missing one, on the short run: no verdict
    for d in (da, db):
        write_stop(d, stop)
    stop_path(db).write_text(stop_path(db).read_text().replace('"inputs_run": 10', '"inputs_run": 40'))
    assert main(["gate", str(da), str(db), "--policy", str(tmp_path / "policy.toml")]) == 2
    assert "damaged" in capsys.readouterr().out
    stop_path(da).unlink()
    stop_path(db).unlink()
    assert main(["gate", str(da), str(db), "--policy", str(tmp_path / "policy.toml")]) == 2
    assert "stop record (ab_stop.json) is missing" in " ".join(capsys.readouterr().out.split())


def test_the_timing_rule_settles_on_the_gates_own_limit_including_the_aa_floor(tmp_path: Path) -> None:
    """settle reads the limit the gate's rule reads (max_change_pct and/or max_change_aa_multiple x the A/A
    floor, the smaller): a 30%-slower variant against a 3x floor of a quiet A/A session settles FAIL even when
    an absolute 50% limit alone would have passed it, and a policy stating only the multiple settles at all
    (it read max_change_pct, None there, and raised TypeError)."""
    inputs = inputs_file(tmp_path, n=12)  # the CS gives no bounds before 10 inputs
    aa = [score_run(d) for d in session(tmp_path / "aa", "x", "x", sigma=0.02, noise_seed=1, inputs=inputs)]
    ab = session(tmp_path / "ab", "x", "y", sigma=0.02, variant_factor=1.3, noise_seed=3, inputs=inputs)
    floor = aa_floor(aa[0], aa[1], seed=BOOTSTRAP_SEED, resamples=2000)
    c = replace(compare(score_run(ab[0]), score_run(ab[1])), aa_floor=floor)
    limit = 3 * floor.measures["warm_prefill_ms"].floor_pct  # type: ignore[operator]
    assert 0.0 < limit < 20.0  # a quiet A/A: well under the variant's +30%
    for body in ("max_change_aa_multiple = 3\n", "max_change_pct = 50.0\nmax_change_aa_multiple = 3\n"):
        policy = parse_policy(f"schema_version = 1\n[rules.warm_prefill_change]\nenabled = true\n{body}", "p")
        timing = settle(c, policy, 12, 12).rules[0]
        assert timing.rule == "warm_prefill_change" and timing.how == "cs"
        assert timing.low_pct is not None and timing.low_pct > limit and timing.state == SETTLED_FAIL, timing
    # without the floor the multiple cannot be judged: the rule stays open, naming the flag
    policy = parse_policy(
        "schema_version = 1\n[rules.warm_prefill_change]\nmax_change_aa_multiple = 3\n", "p"
    )
    open_rule = settle(replace(c, aa_floor=None), policy, 12, 12).rules[0]
    assert open_rule.state == "open" and "--aa-floor" in open_rule.detail
