"""bench/faults.py, the fault detection matrix: reading the verdict lbeval wrote, judging it, writing the matrix."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench import faults as matrix
from eval.cli import build_parser
from eval.records.stop import SETTLED_PASS, StopRecord, write_stop
from eval.report.summary_verdict import SummaryVerdict
from eval.serve.faults.lbeval_engine_faults.faults import FAULTS
from eval.serve.launch_specs import load_launch_specs
from tests.eval.runfactory import RunSpec, make_rows, write_inputs_file, write_run

ROOT = Path(__file__).resolve().parents[3]

SUMMARY = SummaryVerdict.from_dict(
    {
        "outcome": "FAIL",
        "exit_code": 1,
        "results": [
            {
                "rule": "accuracy",
                "status": "pass",
                "measured": "0",
                "threshold": "2",
                "rows": [{"table": "accuracy", "row": "qasper", "failed": False}],
            },
            {
                "rule": "cause_rows",
                "status": "fail",
                "measured": "1",
                "threshold": "0",
                "rows": [
                    {"table": "attribution", "row": "cache", "failed": False},
                    {"table": "attribution", "row": "hitlen_L_200", "failed": True},
                ],
            },
            {"rule": "cache_valid", "status": "fail", "measured": "1", "threshold": "0", "rows": []},
            {"rule": "timing", "status": "no data", "measured": "n/a", "threshold": "5", "rows": []},
        ],
    }
)


def test_caught_by_names_every_failing_rule_and_only_its_failed_rows() -> None:
    assert matrix.caught_by(SUMMARY) == ["cause_rows @ attribution/hitlen_L_200", "cache_valid"]
    assert matrix.caught_by(None) == []  # a summary written without a policy, or none written


PARTIAL = matrix.Case(
    "partial_prefix",
    "x",
    (
        matrix.Failing("cause_rows", ("attribution/hitlen_3B", "attribution/hitlen")),
        matrix.Failing("cache_valid"),
    ),
    tolerate=(matrix.Failing("cold_scores", ("accuracy/qasper",)),),
)
EXACT = ["cause_rows @ attribution/hitlen_3B", "cause_rows @ attribution/hitlen", "cache_valid"]

# (verdict, failing rule @ rows as caught_by writes them) -> (caught, as expected, misattributed, missing)
JUDGE_TABLE = [
    ("exact match", "FAIL", EXACT, (True, True, [], [])),
    ("exact match, another order", "FAIL", EXACT[::-1], (True, True, [], [])),
    ("a tolerated row beside", "FAIL", [*EXACT, "cold_scores @ accuracy/qasper"], (True, True, [], [])),
    (
        "an extra rule",
        "FAIL",
        [*EXACT, "cache_isolation @ cache/control_salt_ok"],
        (True, False, ["cache_isolation @ cache/control_salt_ok"], []),
    ),
    (
        "an extra row of an expected rule",
        "FAIL",
        [*EXACT, "cause_rows @ attribution/batch"],
        (True, False, ["cause_rows @ attribution/batch"], []),
    ),
    (
        "a missing row",
        "FAIL",
        ["cause_rows @ attribution/hitlen", "cache_valid"],
        (True, False, [], ["cause_rows @ attribution/hitlen_3B"]),
    ),
    ("a rule expected without rows, missing", "FAIL", EXACT[:2], (True, False, [], ["cache_valid"])),
    (
        "a lookalike row name: hitlen_3B+1 for hitlen_3B",
        "FAIL",
        ["cause_rows @ attribution/hitlen_3B+1", "cause_rows @ attribution/hitlen", "cache_valid"],
        (True, False, ["cause_rows @ attribution/hitlen_3B+1"], ["cause_rows @ attribution/hitlen_3B"]),
    ),
    (
        "a lookalike row name: hitlen_3 for hitlen_3B",
        "FAIL",
        ["cause_rows @ attribution/hitlen_3", "cause_rows @ attribution/hitlen", "cache_valid"],
        (True, False, ["cause_rows @ attribution/hitlen_3"], ["cause_rows @ attribution/hitlen_3B"]),
    ),
    (
        "the same row under another table",
        "FAIL",
        ["cause_rows @ cache/hitlen_3B", "cause_rows @ attribution/hitlen", "cache_valid"],
        (True, False, ["cause_rows @ cache/hitlen_3B"], ["cause_rows @ attribution/hitlen_3B"]),
    ),
    (
        "a lookalike rule name",
        "FAIL",
        [*EXACT[:2], "cache_valid_b"],
        (True, False, ["cache_valid_b"], ["cache_valid"]),
    ),
    (
        "a rule expected without rows failing on a row",
        "FAIL",
        [*EXACT[:2], "cache_valid @ cache/x"],
        (True, False, ["cache_valid @ cache/x"], ["cache_valid"]),
    ),
    ("the tolerated rule alone", "FAIL", ["cold_scores @ accuracy/qasper"], (True, False, [], sorted(EXACT))),
    ("no verdict", "NO VERDICT", EXACT, (False, False, [], [])),
    ("a PASS", "PASS", [], (False, False, [], sorted(EXACT))),
]


@pytest.mark.parametrize(
    ("verdict", "found", "want"), [c[1:] for c in JUDGE_TABLE], ids=[c[0] for c in JUDGE_TABLE]
)
def test_judge_a_fault_must_fail_on_exactly_its_rules_and_rows(
    verdict: str, found: list[str], want: tuple[bool, bool, list[str], list[str]]
) -> None:
    got = matrix.judge(PARTIAL, verdict, found)
    assert (got.caught, got.as_expected, got.misattributed, got.missing) == want


def test_judge_the_clean_control_must_pass_and_any_failing_rule_is_misattributed() -> None:
    clean = matrix.CASES[0]
    assert clean.expect == () and clean.expected() == "PASS"
    assert matrix.judge(clean, "PASS", []) == matrix.Judgement(True, True, [], [])
    failed = matrix.judge(clean, "FAIL", ["cache_valid"])
    assert failed == matrix.Judgement(False, False, ["cache_valid"], [])
    assert matrix.judge(clean, "NO VERDICT", []).as_expected is False


def test_judge_reads_caught_by_of_a_summary() -> None:
    case = matrix.Case(
        "x", "x", (matrix.Failing("cause_rows", ("attribution/hitlen_L_200",)), matrix.Failing("cache_valid"))
    )
    assert matrix.judge(case, "FAIL", matrix.caught_by(SUMMARY)).as_expected


def measured_matrix() -> dict[str, tuple[str, list[str]]]:
    """fault -> (verdict, caught by) of the last whole matrix on the real engine, from its Markdown table."""
    text = (ROOT / "docs" / "measured" / "faults-matrix-2026-12-05.md").read_text(encoding="utf-8")
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if len(cells) == 8 and cells[0] in {c.fault for c in matrix.CASES} and cells[1] != "---":
            out[cells[0]] = (cells[2], [] if cells[3] == "-" else cells[3].split("; "))
    return out


# the rules, rows and fault classes the default gate, plan and plugin gained after the 2026-12-05 matrix
SINCE_MATRIX = {"cross_variant_cold"}
ROWS_SINCE_MATRIX = {"attribution/hitlen_middle", "attribution/hitlen_deepest_partial"}
CASES_SINCE_MATRIX = {
    "logprob_shift",
    "deep_partial",
    "deep_partial_5",
    "hybrid_clean",
    "hybrid_warm_numerics",
    "hybrid_partial_prefix",
}


def as_then(f: matrix.Failing) -> matrix.Failing:
    return replace(f, rows=tuple(r for r in f.rows if r not in ROWS_SINCE_MATRIX))


def test_the_expectations_rejudge_the_last_real_matrix_as_the_docs_say() -> None:
    """The 2026-12-05 matrix on the real engine, judged by today's exact expectations (less the rules, rows and
    classes added since):
    every case as expected but usage_overreport, whose batch and repeats rows and salt control were
    misattributions (docs/faults.md)."""
    measured = measured_matrix()
    then = [
        replace(c, expect=tuple(as_then(f) for f in c.expect if f.rule not in SINCE_MATRIX))
        for c in matrix.CASES
        if c.fault not in CASES_SINCE_MATRIX
    ]
    assert sorted(measured) == sorted(c.fault for c in then)
    judged = {c.fault: matrix.judge(c, *measured[c.fault]) for c in then}
    assert [f for f, j in judged.items() if not j.as_expected] == ["usage_overreport"]
    assert all(j.caught and not j.missing for j in judged.values())
    assert judged["usage_overreport"].misattributed == sorted(
        [
            "cause_rows @ attribution/batch",
            "cause_rows @ attribution/batch_b2",
            "cause_rows @ attribution/repeats",
            "cause_rows @ attribution/repeats_batched",
            "cache_isolation @ cache/control_salt_ok",
        ]
    )


def test_every_expected_rule_says_why_and_names_whole_rows() -> None:
    for case in matrix.CASES:
        for f in (*case.expect, *case.tolerate):
            assert f.why, (case.fault, f.rule)
            assert all(row.count("/") == 1 and not row.endswith(("_", "/")) for row in f.rows), (
                case.fault,
                f,
            )
        names = [n for f in case.expect for n in f.names()]
        assert len(names) == len(set(names)), case.fault
        assert not {n for f in case.expect for n in f.names()} & {n for f in case.tolerate for n in f.names()}


def test_the_matrix_covers_every_fault_of_the_plugin_with_its_launch_spec() -> None:
    cases = [c for c in matrix.CASES if c.expect]
    specs = load_launch_specs()
    injected = {c.fault: specs[c.spec].env["LBEVAL_FAULT"] for c in cases}
    assert sorted(set(injected.values())) == sorted(FAULTS)  # every fault class, by its spec's LBEVAL_FAULT
    # a case is named after its fault, or after its fault and a parameter (deep_partial_5: another depth), or
    # after the server it is injected into and its fault (hybrid_partial_prefix: on cpu-hybrid, its base)
    assert all(
        name in (fault, f"hybrid_{fault}") or name.startswith(fault + "_") for name, fault in injected.items()
    ), injected
    assert all(c.base == matrix.HYBRID_SPEC for c in matrix.CASES if c.fault.startswith("hybrid_"))
    assert all(
        specs[c.spec].name.startswith("cpu-hybrid") for c in matrix.CASES if c.base == matrix.HYBRID_SPEC
    )
    assert len({c.fault for c in matrix.CASES}) == len(matrix.CASES)
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
    assert md[5] == "| partial_prefix | cause_rows @ hitlen_L_200 | PASS | - | - | - | 4 | 130 | NO | no |"
    assert md[-1] == "- partial_prefix: a\\|b"
    data = json.loads((tmp_path / "matrix.json").read_text(encoding="utf-8"))
    assert [o["caught"] for o in data["outcomes"]] == [True, False]
    assert len(data["cases"]) == len(matrix.CASES)
    page = (tmp_path / "matrix.html").read_text(encoding="utf-8")
    assert "<svg" in page and "partial_prefix" in page and "missed" in page


def test_a_misattribution_is_marked_in_the_matrix_and_fails_the_command(tmp_path: Path) -> None:
    exact = matrix.Outcome(
        "salt_ignored", "x", "cache_isolation @ cache/control_salt_ok", "FAIL", 1, [], 4, 54.0, True, True
    )
    extra = matrix.Outcome(
        "usage_overreport", "x", "cache_reports_consistent @ cache/cache_findings", "FAIL", 1,
        ["cache_reports_consistent @ cache/cache_findings", "cause_rows @ attribution/batch"], 4, 92.0, True, False,
        misattributed=["cause_rows @ attribution/batch"],
    )  # fmt: skip
    missing = replace(exact, fault="short_hits", as_expected=False, missing=["no_invalid_warm @ cache/x"])
    assert matrix.exit_code([exact]) == 0
    assert matrix.exit_code([exact, extra]) == 1 and matrix.exit_code([missing]) == 1
    matrix.write_matrix([exact, extra, missing], tmp_path, "hdr")
    md = (tmp_path / "matrix.md").read_text(encoding="utf-8").splitlines()
    assert md[2].startswith("| fault | expected rule @ row | verdict | caught by | misattributed | missing |")
    assert md[5].split(" | ")[4:6] == ["cause_rows @ attribution/batch", "-"]
    assert md[6].split(" | ")[4:6] == ["-", "no_invalid_warm @ cache/x"]
    data = json.loads((tmp_path / "matrix.json").read_text(encoding="utf-8"))
    assert data["outcomes"][1]["misattributed"] == ["cause_rows @ attribution/batch"]


def test_unknown_fault_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        matrix.parse(["--only", "partial_prefix,nope"])
    assert exc.value.code == 2 and "unknown fault(s) nope" in capsys.readouterr().err


def test_inputs_to_the_verdict_from_the_stop_record_else_the_manifest(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    assert matrix.count_inputs(run) is None
    rows = make_rows(1, 1)
    write_inputs_file(tmp_path / "in.jsonl", rows)
    run = write_run(tmp_path, RunSpec("v", rows, tmp_path / "in.jsonl"))
    assert matrix.count_inputs(run) is None  # a header that does not say (a sparse one)
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    manifest["inputs_header"] = {"n_taken": {"qasper": 2, "gov_report": 1}}
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert matrix.count_inputs(run) == 3
    stop = StopRecord(
        1, "s", ("v/a", "w/b"), 1, "default", SETTLED_PASS, "every rule settled", 2, 9,
        (("qasper", "0"), ("qasper", "1")), (4, 4), (), 1.5, 6.75, "2026-09-09T10:00:00Z",
    )  # fmt: skip
    write_stop(run, stop)  # the stop record (read by its own reader: a damaged one is refused)
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
