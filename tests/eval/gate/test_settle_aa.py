"""`lbeval ab --stop-when-settled --aa-floor RUN_A RUN_B`: a policy stated only with
max_change_aa_multiple settles inside the session, and the gate given the same --aa-floor reproduces the stop.
Without --aa-floor in ab, the rule has no limit inside the session and never settles."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from eval.analyze.aa_floor import aa_floor
from eval.analyze.compare import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from eval.analyze.score import score_run
from eval.cli import main
from eval.records.stop import SETTLED_FAIL, read_stop
from tests.eval.aa_factory import inputs_file, session
from tests.support.fake_server import FakeServer

N = 24
POLICY = "schema_version = 1\n[rules.warm_prefill_change]\nenabled = true\nmax_change_aa_multiple = 3.0\n"


def _ab(tmp_path: Path, inputs: Path, run_id: str, *extra: str) -> tuple[Path, Path]:
    with FakeServer() as a, FakeServer(block_size=8) as b:
        b.slowdown = 2.0  # twice as slow, with another uncached tail per input (the ratio varies per input)
        code = main(
            ["ab", "base", "var", "--inputs", str(inputs), "--base-url-a", a.base_url, "--base-url-b", b.base_url,
             "--out", str(tmp_path / "runs"), "--passes", "cold,warm,timing", "--timing-reps", "2", "--scenarios", "cache",
             "--run-id", run_id, "--quiet", "--stop-when-settled", "--policy", str(tmp_path / "aa.toml"), *extra]
        )  # fmt: skip
    assert code in (0, 3)
    runs = tmp_path / "runs"
    return runs / "base" / run_id, runs / "var" / run_id


def test_the_aa_floor_settles_inside_ab_and_the_gate_reproduces_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "aa.toml").write_text(POLICY)
    inputs = inputs_file(tmp_path, N)
    aa = session(tmp_path / "aa", "x", "x", sigma=0.05, noise_seed=4, inputs=inputs)
    floor = aa_floor(score_run(aa[0]), score_run(aa[1]), seed=BOOTSTRAP_SEED, resamples=BOOTSTRAP_RESAMPLES)
    pct = floor.floor("warm_prefill_ms")
    assert pct is not None and 3 * pct < 50  # the 2x slower variant lies far beyond 3x the floor
    da, db = _ab(tmp_path, inputs, "with-floor", "--aa-floor", str(aa[0]), str(aa[1]))
    stop = read_stop(da)
    assert stop is not None and stop.decision == SETTLED_FAIL and 10 <= stop.inputs_run < N
    (rule,) = stop.rules
    assert rule.rule == "warm_prefill_change" and rule.how == "cs" and rule.low_pct is not None
    assert rule.low_pct > 3 * pct
    capsys.readouterr()
    gate = ["gate", str(da), str(db), "--policy", str(tmp_path / "aa.toml")]
    assert main([*gate, "--aa-floor", str(aa[0]), str(aa[1])]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "FAIL warm_prefill_change" in re.sub(r" +", " ", out)
        and f"stopped after {stop.inputs_run} of {N}" in out
    )
    # the gate without the floor cannot state the limit: no verdict (never the stop's FAIL unchecked)
    assert main(gate) == 2


def test_without_the_aa_floor_the_session_never_settles(tmp_path: Path) -> None:
    (tmp_path / "aa.toml").write_text(POLICY)
    da, _ = _ab(tmp_path, inputs_file(tmp_path, 12), "no-floor")
    assert read_stop(da) is None  # ran to the end: the limit needs the floor


def test_aa_floor_without_stop_when_settled_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["ab", "a", "b", "--inputs", str(inputs_file(tmp_path, 2)), "--base-url-a", "http://127.0.0.1:9",
                 "--base-url-b", "http://127.0.0.1:9", "--aa-floor", "x", "y"])  # fmt: skip
    assert code == 78 and "--aa-floor is for --stop-when-settled" in capsys.readouterr().err
