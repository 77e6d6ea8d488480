"""The gate's verdict at the top of report.md and report.html, and the rows a failing rule points at marked.

`lbeval compare` evaluates the policy (the one evaluation `lbeval gate` uses) and the reports render that
Verdict: a passing, a failing and a no-verdict comparison, each checked in both formats and in summary.json.
Expected figures are worked out by hand from the synthesized runs (tests/eval/runfactory.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from eval.analyze.compare import compare
from eval.analyze.score import score_run
from eval.cli import main
from eval.gate.policy import RULE_PARAMS, parse_policy
from eval.gate.registry import rules
from eval.gate.rules import evaluate
from eval.gate.verdict import FAIL, SKIPPED
from eval.report.tables import build_tables
from tests.eval.runfactory import base_and_variant, write_run
from tests.eval.shipped_policy import RUNFACTORY, checked_rules, enabled_rules

SEQUENTIAL_MD = (
    "sequential runs (may be machine drift); timing is gated in interleaved sessions (lbeval ab), or with "
    "interleaved\\_only = false"
)
SKIPPED_MD = (
    f"Skipped: warm\\_prefill\\_change ({SEQUENTIAL_MD}); cold\\_prefill\\_change ({SEQUENTIAL_MD}); "
    "hitlen\\_cache\\_honoured (neither run has the hitlen scenario); batch\\_invariant (disabled in the policy)"
)


def _compare(tmp_path: Path, capsys: pytest.CaptureFixture[str], **variant_kw: Any) -> tuple[str, str, dict]:  # type: ignore[type-arg]
    base, variant = base_and_variant(tmp_path, **variant_kw)
    runs = tmp_path / "runs"
    write_run(runs, base)
    write_run(runs, variant)
    assert main(["compare", "main", "patched", "--runs", str(runs)]) == 0  # the gate decides exit codes
    capsys.readouterr()
    out = runs / "compare" / "main__patched"
    summary = json.loads((out / "summary.json").read_text())
    return (out / "report.md").read_text(), (out / "report.html").read_text(), summary


def _marked_md(md: str) -> list[str]:
    return [line.split(" | ")[0] for line in md.splitlines() if line.startswith("| **✗")]


def _marked_html(html: str) -> list[str]:
    return re.findall(r'<tr id="([^"]+)" class="failed">', html)


def test_passing_comparison(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    md, html, summary = _compare(tmp_path, capsys)
    assert "### Gate verdict: PASS" in md
    assert f"**PASS: all {checked_rules(*RUNFACTORY)} checked rules hold (lbeval gate exits 0).**" in md
    assert md.index("### Gate verdict") < md.index("### 1. Accuracy")  # at the top
    assert "| PASS | cold\\_warm\\_equality | variant 6/6, base 6/6 | variant &gt;= base - 0 = 6 |" in md
    assert SKIPPED_MD in md
    assert re.search(r"Policy: eval/(gate/)?policy\\_default\.toml\.", md)  # the shipped default
    assert _marked_md(md) == [] and _marked_html(html) == []
    assert '<section class="banner pass" id="verdict"><h2>Gate verdict: PASS</h2>' in html
    assert html.index('id="verdict"') < html.index('<h2 id="accuracy">')
    v = summary["verdict"]
    assert (v["outcome"], v["exit_code"], v["reasons"]) == ("PASS", 0, [])
    # in the registry's order; skipped: the rules the shipped policy disables, and those it does not check on two
    # sequential runs without hitlen; every other rule passes
    assert [r["rule"] for r in v["results"]] == [r.name for r in rules()]
    skipped = {*RUNFACTORY, *(set(RULE_PARAMS) - set(enabled_rules()))}
    assert {r["rule"]: r["status"] for r in v["results"]} == {
        r.name: "skipped" if r.name in skipped else "pass" for r in rules()
    }


def test_failing_comparison_marks_the_rows_that_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # qas00 answers "no idea" (qa_f1 0 vs "yes") in every pass: qasper cold 75.00 vs base 100.00; one errored
    # control request in the variant: no_errors fails on the cache table's errors row
    texts = {("qas00", p, 0): "no idea" for p in ("cold", "warm", "repeat")}
    md, html, summary = _compare(tmp_path, capsys, texts=texts, errors={("qas01", "control_salt", 0)})
    assert "### Gate verdict: FAIL" in md
    assert (
        f"**FAIL: 3 of {checked_rules(*RUNFACTORY)} rules failed: cold\\_scores, no\\_errors, "
        "cross\\_variant\\_cold (lbeval gate exits 1).**" in md
    )
    assert (
        "| **FAIL** | cold\\_scores | qasper 75.00 vs base 100.00 (-25.00); gov\\_report cold outputs identical "
        "2/2 (outside tolerance: qasper) | \\|variant - base\\| &lt;= 0.5 points per dataset, or identical cold "
        "outputs |"
    ) in md
    assert "| **FAIL** | no\\_errors | errored requests: base 0, variant 1 | &lt;= 0 per run |" in md
    # the accuracy row of qasper (not gov_report), the cross-variant cold row (qas00's cold output differs from
    # the base's) and the cache table's errors row
    assert _marked_md(md) == [
        "| **✗ qasper** (fails cold\\_scores)",
        "| **✗ base cold vs variant cold: outputs equal (text)** (fails cross\\_variant\\_cold)",
        "| **✗ errored requests (all passes)** (fails no\\_errors)",
    ]
    assert _marked_html(html) == ["accuracy-qasper", "cross-cross_cold_text", "cache-errors"]
    assert (
        '<tr id="accuracy-qasper" class="failed"><td>qasper <span class="failtag">✗ fails cold_scores</span></td>'
        in html
    )
    assert '<tr id="accuracy-gov_report"><td>gov_report</td>' in html
    assert '<section class="banner fail" id="verdict">' in html and '<td class="st-fail">FAIL</td>' in html
    v = summary["verdict"]
    assert (v["outcome"], v["exit_code"]) == ("FAIL", 1)
    cold = next(r for r in v["results"] if r["rule"] == "cold_scores")
    assert cold["rows"] == [
        {"table": "accuracy", "row": "qasper", "failed": True},
        {"table": "accuracy", "row": "gov_report", "failed": False},
    ]


def test_no_verdict_comparison(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # one control record missing: 53 of the 54 planned requests (6 inputs x (3 + 2 x 2 timing + 2 controls))
    md, html, summary = _compare(tmp_path, capsys, complete=False, missing={("gov01", "control_sibling", 0)})
    reason = "variant run 20260909T103000Z-test is incomplete (53/54 planned requests have a record)"
    assert "### Gate verdict: NO VERDICT" in md
    assert "**NO VERDICT: the data cannot support one (1 reason below; lbeval gate exits 2).**" in md
    assert f"Why there is no verdict:\n\n- {reason}" in md
    assert '<section class="banner no-verdict" id="verdict"><h2>Gate verdict: NO VERDICT</h2>' in html
    assert f"<li>{reason}</li>" in html
    assert _marked_md(md) == [] and _marked_html(html) == []
    assert summary["verdict"]["outcome"] == "NO VERDICT" and summary["verdict"]["reasons"] == [reason]


def test_compare_and_gate_give_the_same_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = {("qas00", p, 0): "no idea" for p in ("cold", "warm", "repeat")}
    _, _, summary = _compare(tmp_path, capsys, texts=texts)
    assert (
        main(["gate", "main", "patched", "--runs", str(tmp_path / "runs")])
        == summary["verdict"]["exit_code"]
        == 1
    )


def test_compare_uses_the_given_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "loose.toml"
    policy.write_text("schema_version = 1\n[rules.cold_scores]\ntolerance_points = 30.0\n")
    base, variant = base_and_variant(
        tmp_path, texts={("qas00", p, 0): "no idea" for p in ("cold", "warm", "repeat")}
    )
    runs = tmp_path / "runs"
    write_run(runs, base)
    write_run(runs, variant)
    assert main(["compare", "main", "patched", "--runs", str(runs), "--policy", str(policy)]) == 0
    md = (runs / "compare" / "main__patched" / "report.md").read_text()
    assert "**PASS: all 1 checked rules hold (lbeval gate exits 0).**" in md
    assert f"Policy: {str(policy).replace('_', chr(92) + '_')}." in md


ALL_ON = """
schema_version = 1
[data]
min_valid_pair_fraction = 0.0
[rules.cold_warm_equality]
[rules.warm_repeat_equality]
[rules.cold_scores]
[rules.no_invalid_warm]
[rules.no_errors]
[rules.warm_prefill_change]
max_change_pct = 0.0
interleaved_only = false
[rules.cross_variant_cold]
"""


def test_every_row_a_rule_points_at_is_a_row_of_the_report(tmp_path: Path) -> None:
    # every rule enabled and failing: each RowRef must name a (table, row) that build_tables makes
    texts = {("qas00", p, 0): "no idea" for p in ("cold", "warm", "repeat")}
    texts[("qas01", "warm", 0)] = "something else"
    texts[("gov00", "repeat", 0)] = "Something else."
    slower = {"timing_cold": 0.200, "timing_warm": 0.090}  # warm prefill +19%: the timing rule fails
    base, variant = base_and_variant(
        tmp_path,
        texts=texts,
        errors={("qas02", "control_salt", 0)},
        invalid={("qas03", "warm", 0): True},
        prefill_s=slower,
    )
    runs = tmp_path / "runs"
    c = compare(score_run(write_run(runs, base)), score_run(write_run(runs, variant)))
    verdict = evaluate(c, parse_policy(ALL_ON, "all.toml"))
    checked = [r.status for r in verdict.results if r.status != SKIPPED]  # the scenario rules: not in ALL_ON
    assert checked == [FAIL] * 7
    rows = {(t.id, r.key) for t in build_tables(c) for r in t.rows}
    refs = [(ref.table, ref.row) for r in verdict.results for ref in r.rows]
    assert len(refs) == 8 and set(refs) <= rows
    assert [(ref.table, ref.row) for r in verdict.results for ref in r.rows if ref.failed] == [
        ("agreement", "cold_warm_text"),
        ("agreement", "warm_repeat_text"),
        ("accuracy", "qasper"),
        ("cache", "invalid_warm_attempts"),
        ("cache", "errors"),
        ("timing", "warm_prefill_ms"),
        ("cross", "cross_cold_text"),
    ]
