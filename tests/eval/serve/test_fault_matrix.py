"""bench/faults.py, the fault detection matrix: reading the verdict lbeval wrote, judging it, writing the matrix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import faults as matrix
from eval.cli import build_parser
from eval.serve.faults.lbeval_engine_faults.faults import FAULTS
from eval.serve.launch_specs import load_launch_specs

SUMMARY = {
    "verdict": {
        "outcome": "FAIL",
        "results": [
            {
                "rule": "accuracy",
                "status": "pass",
                "rows": [{"table": "accuracy", "row": "qasper", "failed": False}],
            },
            {
                "rule": "cause_rows",
                "status": "fail",
                "rows": [
                    {"table": "attribution", "row": "cache", "failed": False},
                    {"table": "attribution", "row": "hitlen_L_200", "failed": True},
                ],
            },
            {"rule": "cache_valid", "status": "fail", "rows": []},
            {"rule": "timing", "status": "no data", "rows": []},
        ],
    }
}


def test_caught_by_names_every_failing_rule_and_only_its_failed_rows() -> None:
    assert matrix.caught_by(SUMMARY) == ["cause_rows @ attribution/hitlen_L_200", "cache_valid"]
    assert matrix.caught_by({"verdict": None}) == [] and matrix.caught_by({}) == []


def test_judge_a_fault_must_fail_by_its_rule_on_its_row_and_clean_must_pass() -> None:
    partial = next(c for c in matrix.CASES if c.fault == "partial_prefix")
    found = matrix.caught_by(SUMMARY)
    assert matrix.judge(partial, "FAIL", found) == (True, True)
    assert matrix.judge(partial, "FAIL", ["cause_rows @ attribution/cache_cold_warm"]) == (True, False)
    assert matrix.judge(partial, "PASS", []) == (False, False)
    assert matrix.judge(partial, "NO VERDICT", found) == (False, False)
    clean = matrix.CASES[0]
    assert clean.rule == "" and matrix.judge(clean, "PASS", []) == (True, True)
    assert matrix.judge(clean, "FAIL", found) == (False, False)


def test_the_matrix_covers_every_fault_of_the_plugin_with_its_launch_spec() -> None:
    cases = {c.fault: c for c in matrix.CASES if c.rule}
    assert sorted(cases) == sorted(FAULTS)
    specs = load_launch_specs()
    assert all(specs[c.spec].env["LBEVAL_FAULT"] == c.fault for c in cases.values())
    assert [c.fault for c in matrix.CASES if c.how == "ab"] == ["warm_slowdown"]


def test_write_matrix_md_json_html(tmp_path: Path) -> None:
    outcomes = [
        matrix.Outcome("clean", "cpu-smollm2-again", "PASS", "PASS", 0, [], 4, 120.0, True, True),
        matrix.Outcome(
            "partial_prefix", "x", "cause_rows @ hitlen_L_200", "PASS", 0, [], 4, 130.4, False, False, "a|b"
        ),
    ]
    matrix.write_matrix(outcomes, tmp_path, "hdr")
    md = (tmp_path / "matrix.md").read_text(encoding="utf-8").splitlines()
    assert md[0] == "hdr"
    assert md[5] == "| partial_prefix | cause_rows @ hitlen_L_200 | PASS | - | 4 | 130 | NO | no |"
    assert md[-1] == "- partial_prefix: a\\|b"
    data = json.loads((tmp_path / "matrix.json").read_text(encoding="utf-8"))
    assert [o["caught"] for o in data["outcomes"]] == [True, False]
    assert len(data["cases"]) == len(matrix.CASES)
    page = (tmp_path / "matrix.html").read_text(encoding="utf-8")
    assert "<svg" in page and "partial_prefix" in page and "missed" in page


def test_unknown_fault_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        matrix.parse(["--only", "partial_prefix,nope"])
    assert exc.value.code == 2 and "unknown fault(s) nope" in capsys.readouterr().err


def test_inputs_to_the_verdict_from_the_stop_record_else_the_manifest(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    assert matrix.count_inputs(run) is None
    header = {"n_taken": {"qasper": 2, "gov_report": 1}}
    (run / "manifest.json").write_text(json.dumps({"inputs_header": header}), encoding="utf-8")
    assert matrix.count_inputs(run) == 3
    (run / "ab_stop.json").write_text(json.dumps({"inputs_run": 2}), encoding="utf-8")
    assert matrix.count_inputs(run) == 2


def test_the_note_is_the_gates_own_summary_line() -> None:
    out = "lbeval gate: policy x\n  PASS     a: b\ngate: NO VERDICT (exit 2): rule w has no data: the\n           variant run\n"
    assert matrix.gate_line(out) == "gate: NO VERDICT (exit 2): rule w has no data: the variant run"
    assert matrix.gate_line("nothing\n") == ""


def test_the_timing_case_asks_lbeval_ab_for_repetitions_until_its_interval_can_clear_the_limit() -> None:
    """The +20% slowdown against the +10% limit: a half-width target below 10 points, which lbeval ab accepts."""
    (case,) = [c for c in matrix.CASES if c.how == "ab"]
    args = build_parser().parse_args(
        ["ab", "a", "b", "--inputs", "x.jsonl", "--stop-when-settled", *case.options]
    )
    assert args.timing_until is not None and 0 < args.timing_until < 10
    assert args.timing_budget is not None and args.timing_budget > 0
    assert [c for c in matrix.CASES if c.options and c.how != "ab"] == []  # run cases take the plan only


def test_a_matrix_written_before_its_last_case_says_it_is_partial() -> None:
    cases = [c for c in matrix.CASES if c.fault in ("clean", "partial_prefix")]
    one = [matrix.Outcome("clean", "cpu-smollm2-again", "PASS", "PASS", 0, [], 4, 120.0, True, True)]
    partial = matrix.header_line(one, cases, Path("inputs-mini-n2.jsonl"), ["--max-tokens", "16"], 61.0)
    assert "1 cases (PARTIAL: 1 of 2 cases so far) on inputs-mini-n2.jsonl" in partial
    assert "whole matrix 61 s" in partial
    full = matrix.header_line(one, cases[:1], Path("inputs-mini-n2.jsonl"), [], 61.0)
    assert "PARTIAL" not in full
