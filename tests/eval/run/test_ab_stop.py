"""`lbeval ab --stop-when-settled` (eval/run/ab.py's stop hook + eval/gate/settle.py) against fake servers."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from eval.cli import main
from eval.gate.policy import load_policy
from eval.gate.settle import stop_check
from eval.records.ab_pairs import read_pairs
from eval.records.run_folder import read_manifest
from eval.records.stop import SETTLED_FAIL, read_stop, stop_path
from eval.run.ab import AbConfig, execute_ab, session_order
from eval.run.config import endpoints
from eval.run.steps import plan_units
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer, Fault

PASSES = ("cold", "warm", "repeat")
SEED = 7


def _config(a: FakeServer, b: FakeServer, tmp_path: Path, n: int, check: bool = True) -> AbConfig:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(n)])
    ca = config_for(a, inputs, tmp_path / "runs", variant="base", passes=PASSES)
    cb = replace(ca, variant="var", topology=endpoints(b.base_url))
    return AbConfig(
        ca, cb, seed=SEED, quiet=True, stop_check=stop_check(load_policy(None)) if check else None
    )


def _third_input(n: int) -> int:
    """The row sent third (session_order is seeded; computed from the plan, not from a run)."""
    rows = [u.row_index for u in session_order(plan_units(n, PASSES, 2), SEED)]
    return list(dict.fromkeys(rows))[2]


def test_reproducible_warm_mismatch_on_input_3_of_12_stops_with_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = _third_input(12)
    with FakeServer() as a, FakeServer() as b:
        # the variant's warm request of that input diverges: warm differs from cold and from repeat
        b.add_fault(Fault("divergence", match=f"Example ex{row}:", salt_seen=1, position=0))
        config = _config(a, b, tmp_path, 12)
        da, db = execute_ab(config)
        stop = read_stop(da)
        assert stop is not None and stop == read_stop(db)
        assert (stop.inputs_run, stop.inputs_planned, stop.decision) == (3, 12, SETTLED_FAIL)
        assert stop.inputs[-1] == ("qasper", f"ex{row}") and "warm_repeat_equality" in stop.reason
        # 3 inputs x 2 sides x one main unit each; no input beyond the third was sent
        assert len(read_pairs(da)) == 3 and {p.example_id for p in read_pairs(da)} == {
            e for _, e in stop.inputs
        }
        assert stop.server_seconds > 0 and stop.server_seconds_full == pytest.approx(stop.server_seconds * 4)
        for d in (da, db):
            m = read_manifest(d)
            assert not m.complete and (m.sessions[-1].outcome or "").startswith(
                "stopped early by a settled decision"
            )
            assert "stopped after 3 of 12 inputs" in (m.sessions[-1].outcome or "")
        capsys.readouterr()
        assert main(["gate", str(da), str(db)]) == 1
        out = capsys.readouterr().out
        assert "FAIL     warm_repeat_equality" in out and "stopped after 3 of 12 inputs" in out
        # the rules still open when it stopped say so, without claiming they settled
        skipped = [x for x in re.sub(r"\n {11}(?=\S)", " ", out).splitlines() if x.startswith("  SKIPPED ")]
        opened = [x for x in skipped if "not settled when the session stopped after 3 of 12 inputs (" in x]
        assert opened and not [x for x in skipped if "settled after" in x], skipped
        assert main(["compare", str(da), str(db), "--out", str(tmp_path / "cmp")]) == 0
        summary = capsys.readouterr().out
        assert "The session stopped after 3 of 12 inputs" in " ".join(summary.split())
        report = (tmp_path / "cmp" / "report.md").read_text()
        assert "stopped after 3 of 12 inputs" in report and "server-seconds" in report
        # resume without --stop-when-settled: the full run, the stop record gone
        da2, db2 = execute_ab(replace(config, stop_check=None))
    assert (da2, db2) == (da, db) and read_manifest(da).complete and read_manifest(db).complete
    assert not stop_path(da).exists() and not stop_path(db).exists() and len(read_pairs(da)) == 12
    assert main(["gate", str(da), str(db)]) == 1  # the full run fails the same rule


def test_a_session_where_nothing_can_settle_runs_to_the_end(tmp_path: Path) -> None:
    with FakeServer() as a, FakeServer() as b:
        da, db = execute_ab(_config(a, b, tmp_path, 4))
    # equality rules settle PASS only at the last input, cold_scores only at the full run: no stop
    assert read_stop(da) is None and read_stop(db) is None
    assert read_manifest(da).complete and read_manifest(db).complete and len(read_pairs(da)) == 4
    assert main(["gate", str(da), str(db)]) == 0


def test_policy_without_stop_when_settled_is_refused(tmp_path: Path) -> None:
    code = main(["ab", "x", "y", "--inputs", str(tmp_path / "i.jsonl"), "--base-url-a", "http://127.0.0.1:9/v1",
                 "--base-url-b", "http://127.0.0.1:9/v1", "--policy", str(tmp_path / "p.toml")])  # fmt: skip
    assert code == 78


def test_short_hits_stop_the_session_with_the_fail_the_gate_gives_on_thin_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every warm hit one block short makes every warm request invalid, so no cold/warm pair is valid: the data
    are thin. The gate FAILs no_invalid_warm on such runs (tests/eval/gate/test_fail_over_thin_data.py), so the
    stop check must settle that FAIL too (it ran all 8 inputs, thin data blocking the stop) and the gate on the
    stopped session must give the FAIL, not a no verdict over the thin data."""
    with FakeServer() as a, FakeServer() as b:
        b.faults.append(Fault("short_hit", times=-1))
        da, db = execute_ab(_config(a, b, tmp_path, 8))
    stop = read_stop(da)
    assert stop is not None and stop.decision == SETTLED_FAIL and stop.inputs_run < 8
    assert "no_invalid_warm" in stop.reason
    capsys.readouterr()
    assert main(["gate", str(da), str(db)]) == 1
    out = capsys.readouterr().out
    assert "FAIL     no_invalid_warm" in out and f"stopped after {stop.inputs_run} of 8 inputs" in out
