"""LongBench v2 scoring of runs: every figure checked against values worked out by hand from hand-made runs
(tests/eval/v2runfactory.py), lbeval's every-input denominator vs the official dropped one, compensated, CoT,
scores.json / scores.md, compare tables and summary.json, and lbeval gate on v2 runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.analyze.compare import compare
from eval.analyze.score import score_run
from eval.benchmarks.longbench_v2.figures import v2_figures
from eval.cli import main
from eval.report.cells import cell_text
from eval.report.json_out import scores_json
from eval.report.markdown import scores_markdown
from eval.report.tables import build_tables
from eval.report.write import write_reports
from tests.eval.v2runfactory import ERROR, INVALID, MISSING, V2Run, v2_row, write_v2_inputs, write_v2_run

ROWS = [
    v2_row("q1", "easy", "short", "A"),
    v2_row("q2", "easy", "medium", "B"),
    v2_row("q3", "hard", "long", "C"),
    v2_row("q4", "hard", "short", "D"),
    v2_row("q5", "hard", "medium", "A"),
    v2_row("q6", "easy", "long", "B"),
]
COLD = {
    ("q1", "cold"): "The correct answer is (A)",  # right
    ("q2", "cold"): "**The correct answer is B**",  # right: '*' stripped, the bare form
    ("q3", "cold"): "I think it is (C).",  # no letter extracted: wrong, 0.25 compensated
    ("q4", "cold"): "",  # empty output: pred.py writes no line (official: left out; lbeval: wrong)
    ("q5", "cold"): ERROR,  # failed request: left out by the official figures, wrong for lbeval
    ("q6", "cold"): "The correct answer is (C)",  # wrong letter
    ("q2", "warm"): INVALID,  # invalid cache state: not counted by lbeval
    ("q6", "repeat"): MISSING,  # no record
}
# cold, worked out by hand:
#   lbeval (6 inputs): right q1 q2 -> 2/6; easy q1 q2 q6 -> 2/3; hard q3 q4 q5 -> 0/3; short q1 q4 -> 1/2;
#                      medium q2 q5 -> 1/2; long q3 q6 -> 0/2; compensated (2 + 0.25)/6
#   official (q4, q5 left out, 4 items): 2/4; easy 2/3; hard q3 -> 0/1; short q1 -> 1/1; medium q2 -> 1/1;
#                      long q3 q6 -> 0/2; compensated (2 + 0.25)/4 = 56.25 -> result.py prints 56.2
COLD_LBEVAL = {
    "overall": 100 * 2 / 6,
    "easy": 100 * 2 / 3,
    "hard": 0.0,
    "short": 50.0,
    "medium": 50.0,
    "long": 0.0,
}
COLD_OFFICIAL = {
    "overall": 50.0,
    "easy": 100 * 2 / 3,
    "hard": 0.0,
    "short": 100.0,
    "medium": 100.0,
    "long": 0.0,
}
COLD_DROPPED = {"overall": 2, "easy": 0, "hard": 2, "short": 1, "medium": 1, "long": 0}


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    return write_v2_inputs(tmp_path / "inputs.jsonl", ROWS)


def test_zero_shot_figures_equal_the_hand_computed_ones(tmp_path: Path, inputs: Path) -> None:
    run_dir = write_v2_run(tmp_path / "runs", V2Run("main", ROWS, inputs, dict(COLD)))
    scored = score_run(run_dir)
    (acc,) = scored.scores.accuracy
    assert (acc.dataset, acc.metric) == ("longbench_v2", "v2_accuracy")
    cold = v2_figures(acc)["cold"]
    assert cold.lbeval == pytest.approx(COLD_LBEVAL)
    assert cold.official == pytest.approx(COLD_OFFICIAL)
    assert cold.lbeval_compensated["overall"] == pytest.approx(100 * 2.25 / 6)
    assert cold.official_compensated["overall"] == pytest.approx(56.25)
    assert round(cold.official_compensated["overall"], 1) == 56.2  # result.py's str(round(x, 1))
    assert cold.dropped == COLD_DROPPED and cold.n["overall"] == 6 and cold.n["hard"] == 3
    assert (cold.empty_outputs, cold.not_counted, cold.unextractable, cold.correct) == (1, 1, 1, 2)
    assert cold.differ
    assert cold.why() == (
        "the official figures leave out 2 of 6 inputs (1 with an empty output (pred.py writes no line); "
        "1 without a valid sample (failed, invalid or missing)); lbeval counts them as wrong"
    )
    # the dataset score (accuracy table, gate) is lbeval's overall accuracy, rounded to 2 decimals
    assert (acc.passes["cold"].score, acc.passes["cold"].n_scored, acc.passes["cold"].n_total) == (
        33.33,
        5,
        6,
    )
    # warm: every answer right, but q2's sample is invalid (not counted): lbeval 5/6, official 5/5
    warm = v2_figures(acc)["warm"]
    assert warm.lbeval["overall"] == pytest.approx(100 * 5 / 6) and warm.official["overall"] == 100.0
    assert warm.dropped["overall"] == 1 and warm.not_counted == 1 and warm.dropped["medium"] == 1
    # repeat: q6 has no record
    repeat = v2_figures(acc)["repeat"]
    assert repeat.lbeval["long"] == 50.0 and repeat.official["long"] == 100.0 and repeat.not_counted == 1
    # per-example scores (scores.json, the paired bootstrap): 1 right, 0 wrong, none where not counted
    examples = scored.example_scores["cold"]
    assert {k[1]: s.official for k, s in examples.items()} == {
        "q1": 1.0, "q2": 1.0, "q3": 0.0, "q4": 0.0, "q6": 0.0,
    }  # fmt: skip


def test_no_dropped_item_means_one_figure(tmp_path: Path, inputs: Path) -> None:
    outputs = {("q1", "cold"): "The correct answer is (B)"}  # one wrong answer, the rest right by default
    scored = score_run(write_v2_run(tmp_path / "runs", V2Run("main", ROWS, inputs, outputs)))
    cold = v2_figures(scored.scores.accuracy[0])["cold"]
    assert not cold.differ and cold.why() is None
    assert cold.lbeval == cold.official and cold.lbeval["overall"] == pytest.approx(100 * 5 / 6)
    assert cold.lbeval["short"] == 50.0 and cold.lbeval["easy"] == pytest.approx(100 * 2 / 3)


COT_ROWS = [
    v2_row("c1", "easy", "short", "A", cot=True),
    v2_row("c2", "hard", "long", "B", cot=True),
    v2_row("c3", "hard", "medium", "C", cot=True),
]
COT = {
    # c1 right; c2's reasoning call gave '' (pred.py writes no line, whatever the answer call said);
    # c3's answer call failed; c1's warm reasoning is unchanged, c3's warm answer is wrong
    ("c1", "cold_answer"): "The correct answer is (A)",
    ("c2", "cold"): "",
    ("c2", "cold_answer"): "The correct answer is (B)",
    ("c3", "cold_answer"): ERROR,
    ("c3", "warm_answer"): "The correct answer is (D)",
}


def test_cot_scores_the_answer_call_and_drops_an_empty_reasoning(tmp_path: Path) -> None:
    inputs = write_v2_inputs(tmp_path / "cot.jsonl", COT_ROWS)
    scored = score_run(write_v2_run(tmp_path / "runs", V2Run("main", COT_ROWS, inputs, dict(COT))))
    acc = scored.scores.accuracy[0]
    cold, warm = v2_figures(acc)["cold"], v2_figures(acc)["warm"]
    # cold by hand: lbeval 1/3 (c1); official: c2 (empty reasoning) and c3 (failed) left out -> 1/1
    assert cold.lbeval["overall"] == pytest.approx(100 / 3) and cold.official["overall"] == 100.0
    assert (cold.empty_outputs, cold.not_counted, cold.dropped["hard"]) == (1, 1, 2)
    # warm by hand: c1 right, c2 right (its warm reasoning is the default, non-empty), c3 wrong -> 2/3 both
    assert warm.lbeval["overall"] == pytest.approx(100 * 2 / 3) and not warm.differ
    assert warm.lbeval["hard"] == 50.0 and warm.lbeval["medium"] == 0.0
    # the answer calls have cache checks and agreement pairs of their own (CoT rows only)
    s = scored.scores
    assert {"cold_answer", "warm_answer", "repeat_answer"} <= set(s.run.passes)
    checks = {c.pass_name: c for c in s.cache}
    assert checks["cold_answer"].n_total == 3 and checks["cold_answer"].errors == 1
    pairs = s.agreement["cold_warm_answer"]
    assert pairs is not None  # c1 and c2 the same text; c3's cold answer call failed
    assert (pairs.n_total, pairs.n_pairs, pairs.text_equal, pairs.errors) == (3, 2, 2, 1)


def test_scores_json_and_md_show_both_figures_and_why(tmp_path: Path, inputs: Path) -> None:
    scored = score_run(write_v2_run(tmp_path / "runs", V2Run("main", ROWS, inputs, dict(COLD))))
    data = json.loads(json.dumps(scores_json(scored)))
    assert list(data["accuracy"][0]) == ["dataset", "metric", "passes", "v2"]  # the entry's layout, unchanged
    v2 = data["accuracy"][0]["v2"]["cold"]
    assert v2["official"]["overall"] == 50.0 and v2["lbeval"]["overall"] == pytest.approx(33.333, abs=1e-3)
    assert v2["dropped"]["overall"] == 2 and v2["empty_outputs"] == 1
    md = scores_markdown(scored.scores)
    assert "### LongBench v2 accuracy (%, official answer extraction)" in md
    lines = md.splitlines()
    lbeval = next(line for line in lines if line.startswith("| cold | lbeval: every input"))
    official = next(line for line in lines if line.startswith("| cold | official: result.py"))
    assert [c.strip() for c in lbeval.split("|")[3:12]] == [
        "33.3", "66.7", "0.0", "50.0", "50.0", "0.0", "37.5", "2/6", "—",
    ]  # fmt: skip
    assert [c.strip() for c in official.split("|")[3:12]] == [
        "50.0", "66.7", "0.0", "100.0", "100.0", "0.0", "56.2", "2/4", "2",
    ]  # fmt: skip
    assert "cold: the official figures leave out 2 of 6 inputs" in md


def test_compare_tables_summary_json_and_gate_on_v2_runs(
    tmp_path: Path, inputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    write_v2_run(runs, V2Run("main", ROWS, inputs, dict(COLD)))
    variant = {**COLD, ("q3", "cold"): "The correct answer is (C)"}  # q3 now right: 3/6
    write_v2_run(runs, V2Run("patched", ROWS, inputs, variant, run_id="20260909T103000Z-v2",
                             started_at="2026-09-09T10:30:00Z", ended_at="2026-09-09T10:40:00Z"))  # fmt: skip
    c = compare(
        score_run(runs / "main" / "20260909T100000Z-v2"), score_run(runs / "patched" / "20260909T103000Z-v2")
    )
    tables = build_tables(c)
    assert [t.id for t in tables][:2] == ["accuracy", "accuracy_v2"]
    v2 = tables[1]
    rows = {r.key: [cell_text(x) for x in r.cells] for r in v2.rows}
    assert rows["cold:base:lbeval"][:4] == ["base", "lbeval: every input", "33.3", "66.7"]
    assert rows["cold:variant:lbeval"][2:5] == ["50.0", "66.7", "33.3"]
    assert rows["cold:variant:official"][2] == "75.0"  # 3 right of the 4 written
    assert rows["cold:base:official"][-2:] == ["2/4", "2"]
    assert "cold base 33.3% (2/6) vs variant 50.0% (3/6)" in v2.reading
    accuracy = {r.key: [cell_text(x) for x in r.cells] for r in tables[0].rows}
    assert accuracy["longbench_v2"][0] == "v2_accuracy" and accuracy["longbench_v2"][2:4] == [
        "33.33",
        "50.00",
    ]
    assert "longbench_v2 (LongBench v2)" in tables[0].note
    out = write_reports(c, tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["tables"]["accuracy_v2"]["rows"][0]["cells"]["overall"] == 33.3
    assert "LongBench v2 accuracy" in (tmp_path / "out" / "report.md").read_text()
    assert "LongBench v2 accuracy" in (tmp_path / "out" / "report.html").read_text()
    del out


def test_lbeval_gate_reads_the_v2_score(
    tmp_path: Path, inputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Clean runs (every request ok): base gets q3 and q6 wrong (4/6), the variant only q6 (5/6)."""
    runs = tmp_path / "runs"
    wrong = {("q3", "cold"): "The correct answer is (A)", ("q6", "cold"): "The correct answer is (A)"}
    write_v2_run(runs, V2Run("main", ROWS, inputs, wrong))
    variant = {("q6", "cold"): "The correct answer is (A)"}
    write_v2_run(runs, V2Run("patched", ROWS, inputs, variant, run_id="20260909T103000Z-v2",
                             started_at="2026-09-09T10:30:00Z", ended_at="2026-09-09T10:40:00Z"))  # fmt: skip
    policy = tmp_path / "policy.toml"
    for tolerance, code in ((20.0, 0), (10.0, 1)):
        policy.write_text(f"schema_version = 1\n[rules.cold_scores]\ntolerance_points = {tolerance}\n")
        assert main(["gate", "main", "patched", "--runs", str(runs), "--policy", str(policy)]) == code
        text = " ".join(capsys.readouterr().out.split())
        assert "longbench_v2 83.33 vs base 66.67 (+16.66)" in text
