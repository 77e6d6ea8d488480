"""The compact terminal summary of `lbeval score`, `compare` and `gate`: its content, its width (<= 100
columns, a path excepted) and plain text (no Markdown escapes, no colour); `--full` prints the Markdown.

Expected figures are worked out by hand from the synthesized runs (tests/eval/runfactory.py): qas00 answers
"no idea" (qa_f1 0 against "yes"), so the variant's qasper score is 3/4 = 75.00 against the base's 100.00.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from eval.cli import main
from eval.report.console import WIDTH, columns, hang, wrap
from tests.eval.runfactory import base_and_variant, write_run
from tests.eval.shipped_policy import RUNFACTORY, checked_rules

NO_IDEA = {("qas00", p, 0): "no idea" for p in ("cold", "warm", "repeat")}
ANSI = re.compile(r"\x1b\[")


def _runs(tmp_path: Path) -> Path:
    base, variant = base_and_variant(tmp_path, texts=NO_IDEA, errors={("qas01", "control_salt", 0)})
    runs = tmp_path / "runs"
    write_run(runs, base)
    write_run(runs, variant)
    return runs


def _plain_and_narrow(out: str, paths: list[Path]) -> list[str]:
    lines = out.splitlines()
    for line in lines:
        if any(str(p) in line for p in paths):
            continue  # a path is never broken: its line may be longer
        assert len(line) <= WIDTH, line
    assert not ANSI.search(out)  # no colour (capsys is not a terminal)
    assert "\\_" not in out and "**" not in out and "\\[" not in out  # no Markdown escapes or emphasis
    assert not [line for line in lines if line.startswith(("|", "#"))]  # no Markdown tables or headings
    return lines


def test_compare_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _runs(tmp_path)
    assert main(["compare", "main", "patched", "--runs", str(runs)]) == 0
    out = capsys.readouterr().out
    report = (runs / "compare" / "main__patched" / "report.html").resolve()
    lines = _plain_and_narrow(out, [report])
    assert 10 <= len(lines) <= 40, out
    assert (
        lines[0]
        == "lbeval compare: base main (run 20260909T100000Z-test) vs variant patched (run 20260909T103000Z-test)"
    )
    rows = {line.split()[0]: line.split() for line in lines if line.startswith(("qasper", "gov_report"))}
    # dataset, metric, base cold, variant cold, cold same, base warm, variant warm, the gate's mark
    assert rows["qasper"] == [
        "qasper",
        "qa_f1",
        "100.00",
        "75.00",
        "3/4",
        "100.00",
        "75.00",
        "FAIL",
        "cold_scores",
    ]
    assert rows["gov_report"] == ["gov_report", "rouge", "100.00", "100.00", "2/2", "100.00", "100.00"]
    text = " ".join(out.split())
    assert "agreement Variant cold/warm 6/6 (base 6/6), warm/repeat 6/6 (base 6/6)" in text
    assert "base vs variant cold outputs equal 5/6" in text
    # qas00's cold output differs across the variants: said before any cause row
    assert "numerics changed everywhere: cold outputs equal 5/6 across variants (token IDs)" in text
    assert re.search(r" timing \S.*?warm prefill \(server\)", text)  # the timing table's reading
    # qas00's cold output differs from the base's: outside the base's own noise (cross_variant_cold)
    assert (
        f"verdict FAIL: 3 of {checked_rules(*RUNFACTORY)} rules failed: cold_scores, no_errors, "
        "cross_variant_cold (lbeval gate exits 1)." in text
    )
    assert "FAIL cold_scores: qasper 75.00 vs base 100.00 (-25.00)" in text
    assert "FAIL no_errors: errored requests: base 0, variant 1" in text
    assert "skipped: warm_prefill_change, cold_prefill_change, hitlen_cache_honoured" in text
    assert lines[-1] == f"wrote      {report} (and report.md, summary.json)"


def test_compare_full_prints_the_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _runs(tmp_path)
    assert main(["compare", "main", "patched", "--runs", str(runs), "--full"]) == 0
    out = capsys.readouterr().out
    assert "### Gate verdict: FAIL" in out and "### 1. Accuracy" in out and "gov\\_report" in out


def test_score_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _runs(tmp_path)
    assert main(["score", "patched", "--runs", str(runs)]) == 0
    out = capsys.readouterr().out
    run_dir = runs / "patched" / "20260909T103000Z-test"
    lines = _plain_and_narrow(out, [run_dir.resolve()])
    assert 6 <= len(lines) <= 15, out
    assert lines[0] == "lbeval score: patched run 20260909T103000Z-test: complete"
    rows = {
        line.split()[0]: line.split()
        for line in lines
        if line.startswith(("dataset", "qasper", "gov_report"))
    }
    assert rows["dataset"] == ["dataset", "metric", "cold", "warm", "repeat", "scored"]
    assert rows["qasper"] == ["qasper", "qa_f1", "75.00", "75.00", "75.00", "4/4"]
    assert rows["gov_report"] == ["gov_report", "rouge", "100.00", "100.00", "100.00", "2/2"]
    text = " ".join(out.split())
    # 6 inputs x (3 passes + 2 x 2 timing + 2 controls) = 54 planned requests
    assert "run model test-model; 6 inputs; 54/54 planned requests recorded; 1 errors" in text
    assert (
        "agreement outputs equal (text): cold/warm 6/6, warm/repeat 6/6, first token (timing) 12/12" in text
    )
    assert "cache expectation unmet: control_salt 5/6" in text
    # prefill per input i: 0.040 + 0.008 i s (+ 0.001 for repetition 1): mean over i = 0..5 of 40.5 + 8 i
    assert "timing warm prefill 60.5 ms" in text
    assert lines[-1] == f"wrote      {(run_dir / 'scores.md').resolve()} (and scores.json)"


def test_score_full_prints_the_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _runs(tmp_path)
    assert main(["score", "patched", "--runs", str(runs), "--full"]) == 0
    assert "### Official LongBench scores" in capsys.readouterr().out


def test_gate_lines_are_wrapped_and_join_back_to_one_line_per_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _runs(tmp_path)
    assert main(["gate", "main", "patched", "--runs", str(runs)]) == 1
    out = capsys.readouterr().out
    _plain_and_narrow(out, [])
    joined = re.sub(r"\n {11}(?=\S)", " ", out)  # continuation lines are indented 11 columns
    # joined back: the two header lines, one line per rule, the summary line
    statuses = ("  PASS ", "  FAIL ", "  SKIPPED ", "  NO DATA ")
    body = joined.splitlines()
    assert body[0].startswith("lbeval gate: policy ") and body[1].startswith("lbeval gate: base main run ")
    # qas00's cold output differs across the variants: the numerics line, then the rules
    assert body[2].startswith("numerics   changed everywhere: cold outputs equal 5/6")
    assert all(line.startswith(statuses) for line in body[3:-1]) and body[-1].startswith(
        "gate: FAIL (exit 1)"
    )
    assert (
        "  FAIL     cold_scores: measured qasper 75.00 vs base 100.00 (-25.00); gov_report cold outputs "
        "identical 2/2; threshold |variant - base| <= 0.5 points per dataset, or identical cold outputs "
        "(outside tolerance: qasper)\n"
    ) in joined
    assert joined.rstrip().endswith(
        f"gate: FAIL (exit 1): 3 of {checked_rules(*RUNFACTORY)} rules failed: cold_scores, no_errors, "
        "cross_variant_cold"
    )


def test_wrapping_helpers() -> None:
    assert wrap("timing", "a " * 60) == ["timing     " + "a " * 44 + "a", " " * 11 + "a " * 14 + "a"]
    assert wrap("cache", "") == ["cache"]
    long = "/x" * 80
    assert wrap("wrote", long) == ["wrote      " + long]  # never split inside a word
    assert hang("  PASS     rule: " + "b " * 50) == [
        "  PASS     rule: " + "b " * 41 + "b",
        " " * 11 + "b " * 7 + "b",
    ]
    assert columns(["name", "n", "score"], [["qasper", "4", "75.00"], ["gov_report", "2", "100.00"]]) == [
        "name        n   score",
        "qasper      4   75.00",
        "gov_report  2  100.00",
    ]
