"""The A/A floor (eval/analyze/aa_floor.py) of `lbeval ab X X` sessions on noisy fake servers, against a cluster
bootstrap written here from the records; what is refused as an A/A calibration; where a change lies."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze.aa_floor import AaFloorError, aa_floor, check_against, position
from eval.analyze.compare import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from eval.analyze.score import score_run
from eval.run.runner import execute_run
from tests.eval.aa_factory import (
    N_INPUTS,
    REPS,
    cluster_bootstrap_ci,
    inputs_file,
    session,
    warm_prefill_pairs,
)
from tests.eval.fake_fixtures import config_for
from tests.support.fake_server import FakeServer


def t3_quantile(p: float) -> float:
    """The Student t quantile with 3 degrees of freedom, by bisection on its closed-form CDF
    F(x) = 1/2 + (atan(x / sqrt 3) + x sqrt 3 / (x^2 + 3)) / pi."""
    lo, hi = 0.0, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        f = 0.5 + (math.atan(mid / math.sqrt(3)) + mid * math.sqrt(3) / (mid * mid + 3)) / math.pi
        lo, hi = (mid, hi) if f < p else (lo, mid)
    return lo


def yuen_by_hand(ids: list[str], a: list[float], b: list[float]) -> tuple[float, float, float]:
    """The gated interval (%) of 6 inputs, from its definition: per-input mean log(b/a), 20 % trimmed (g = 1 of
    each end, h = 4), the winsorized SD over (1 - 2g/n) sqrt(n), Yuen's t quantile at 97.5 % with h - 1 = 3
    degrees of freedom."""
    order = list(dict.fromkeys(ids))
    means = sorted(
        statistics.fmean(math.log(y / x) for i, x, y in zip(ids, a, b, strict=True) if i == key)
        for key in order
    )
    assert len(means) == 6
    trimmed = statistics.fmean(means[1:5])
    winsorized = [means[1], *means[1:5], means[4]]
    half = t3_quantile(0.9875) * statistics.stdev(winsorized) / ((1 - 2 / 6) * math.sqrt(6))
    return tuple(100 * math.expm1(v) for v in (trimmed, trimmed - half, trimmed + half))  # type: ignore[return-value]


def test_t3_quantile_matches_the_published_table() -> None:
    assert t3_quantile(0.975) == pytest.approx(3.182446, abs=1e-6) and t3_quantile(0.99) == pytest.approx(
        4.540703, abs=1e-6
    )


def test_floor_equals_yuens_gated_interval_written_from_the_records(tmp_path: Path) -> None:
    # the floor speaks the interval the timing rules read (docs/timing.md), not the 95% bootstrap
    da, db = session(tmp_path, "x", "x", sigma=0.08)
    floor = aa_floor(score_run(da), score_run(db), seed=BOOTSTRAP_SEED, resamples=BOOTSTRAP_RESAMPLES)
    m = floor.measures["warm_prefill_ms"]
    ids, a, b = warm_prefill_pairs(da, db)
    assert len(ids) == N_INPUTS * REPS == m.n_pairs and m.n_inputs == N_INPUTS and m.left_out == 0
    estimate, low, high = yuen_by_hand(ids, a, b)
    assert m.estimate is not None and math.isclose(m.estimate, estimate, abs_tol=1e-9)
    assert m.ci_low is not None and m.ci_high is not None
    assert math.isclose(m.ci_low, low, abs_tol=1e-6) and math.isclose(m.ci_high, high, abs_tol=1e-6)
    assert m.floor_pct is not None and math.isclose(m.floor_pct, max(abs(low), abs(high)), abs_tol=1e-6)
    boot = cluster_bootstrap_ci(ids, a, b, BOOTSTRAP_SEED, BOOTSTRAP_RESAMPLES)
    assert not math.isclose(m.ci_high, boot[1], abs_tol=1e-3)  # no longer the bootstrap's end
    assert floor.floor("warm_prefill_ms") == m.floor_pct
    assert m.ci_low <= m.estimate <= m.ci_high and m.ci_low < 0 < m.ci_high  # A/A: the interval holds 0
    assert 1.0 < m.floor_pct < 25.0  # what noise of 8% per request gives over 6 inputs x 3 pairs
    assert floor.variant == "x" and floor.runs == (f"x/{da.name}", f"x/{db.name}") and not m.paired_drift
    assert set(floor.measures) == {"warm_prefill_ms", "cold_prefill_ms", "warm_ttft_ms", "cold_ttft_ms"}


def test_noiseless_aa_session_has_a_zero_floor(tmp_path: Path) -> None:
    da, db = session(tmp_path, "x", "x", sigma=0.0)
    floor = aa_floor(score_run(da), score_run(db), seed=1, resamples=500)
    assert floor.floor("warm_prefill_ms") == 0.0 and floor.floor("cold_prefill_ms") == 0.0


def test_refuses_two_runs_that_are_not_one_ab_session(tmp_path: Path) -> None:
    inputs = inputs_file(tmp_path)
    with FakeServer() as s:
        cfg = config_for(s, inputs, tmp_path / "runs", variant="x", passes=("timing",), timing_reps=2)
        r1, r2 = (execute_run(replace(cfg, run_id=name)) for name in ("r1", "r2"))
    with pytest.raises(AaFloorError, match=r"x/r1 and x/r2: not one lbeval ab session \(no common pairing"):
        aa_floor(score_run(r1), score_run(r2), seed=1, resamples=100)


def test_refuses_the_same_run_twice_and_an_ab_session_of_two_variants(tmp_path: Path) -> None:
    da, db = session(tmp_path, "x", "y", sigma=0.05)
    with pytest.raises(AaFloorError, match="the same run folder twice"):
        aa_floor(score_run(da), score_run(da), seed=1, resamples=100)
    with pytest.raises(AaFloorError, match=r"not an A/A calibration: its sides are two variants \(x, y\)"):
        aa_floor(score_run(da), score_run(db), seed=1, resamples=100)
    assert AaFloorError("").exit_code == 2


def test_refuses_aa_runs_that_asked_other_inputs_than_the_compared_runs(tmp_path: Path) -> None:
    aa_a, aa_b = session(tmp_path / "aa", "x", "x", sigma=0.05)
    base, var = session(tmp_path / "ab", "x", "y", sigma=0.05, inputs=inputs_file(tmp_path, n=4))
    floor = aa_floor(score_run(aa_a), score_run(aa_b), seed=1, resamples=100)
    with pytest.raises(AaFloorError, match="asked other inputs than the base run x/ab-"):
        check_against(floor, score_run(base), score_run(var))
    same_a, same_b = session(tmp_path / "ab2", "x", "y", sigma=0.05, inputs=inputs_file(tmp_path / "aa"))
    check_against(floor, score_run(same_a), score_run(same_b))  # the same inputs: accepted


@pytest.mark.parametrize(
    ("low", "high", "floor", "where"),
    [(6.0, 9.0, 5.0, "slower beyond the floor"), (-9.0, -6.0, 5.0, "faster beyond the floor"),
     (-5.0, 5.0, 5.0, "within the floor"), (4.0, 9.0, 5.0, "overlaps the floor"),
     (-6.0, 1.0, 5.0, "overlaps the floor"), (0.1, 0.2, 0.0, "slower beyond the floor")],
)  # fmt: skip
def test_position_of_a_change_against_the_floor(low: float, high: float, floor: float, where: str) -> None:
    assert position(low, high, floor) == where


def test_refuses_sides_whose_servers_differ_in_version(tmp_path: Path) -> None:
    da, db = session(tmp_path, "x", "x", sigma=0.05)
    path = db / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["probe"]["version"] = "0.0.1+other"  # side b's server was another build
    path.write_text(json.dumps(manifest))
    with pytest.raises(
        AaFloorError, match=r"its servers differ in version \('0\.0\.0\+fake', '0\.0\.1\+other'\)"
    ):
        aa_floor(score_run(da), score_run(db), seed=1, resamples=100)
