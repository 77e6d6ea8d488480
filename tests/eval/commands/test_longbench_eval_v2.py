"""`lbeval longbench-eval --v2 PRED_DIR`: LongBench v2's result.py drop-in, checked against figures worked out
by hand from hand-made pred.py files (result.txt text, compensated, lbeval's figures with --data, errors)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval.cli import main
from eval.errors import EXIT_DATA, EXIT_USAGE


def line(
    item_id: str, difficulty: str, length: str, answer: str, response: str, **extra: Any
) -> dict[str, Any]:
    """A line as pred.py writes it (without pred/judge: optional for the drop-in)."""
    return {
        "_id": item_id, "domain": "d", "sub_domain": "s", "difficulty": difficulty, "length": length,
        "question": "Q?", "choice_A": "a", "choice_B": "b", "choice_C": "c", "choice_D": "d", "answer": answer,
        "context": "text", "response": response, **extra,
    }  # fmt: skip


ZERO_SHOT = [
    line("1", "easy", "short", "A", "The correct answer is (A)"),  # right
    line("2", "hard", "medium", "B", "The correct answer is (C)"),  # wrong
    line("3", "hard", "long", "C", "I do not know."),  # no letter: 0, compensated 0.25
    line("4", "easy", "long", "D", "The correct answer is D"),  # right (the bare form)
]
COT = [
    line("1", "easy", "short", "A", "The correct answer is (A)", response_cot="Step 1..."),
    line("2", "hard", "medium", "B", "The correct answer is (B)", response_cot="Step 1..."),
]
# by hand, result.py's round(100 * points / n, 1):
#   model_a: overall 2/4 = 50.0, easy 2/2 = 100.0, hard 0/2 = 0.0, short 1/1 = 100.0, medium 0/1 = 0.0,
#            long 1/2 = 50.0; compensated overall 2.25/4 = 56.25 -> 56.2, hard 0.25/2 = 12.5, long 1.25/2 = 62.5
#   model_a_cot: 100.0 everywhere but long, which has no item ('-'; result.py would divide by zero)
RESULT = (
    "Model\tOverall\tEasy\tHard\tShort\tMedium\tLong\n"
    "model_a\t50.0\t100.0\t0.0\t100.0\t0.0\t50.0\n"
    "model_a_cot\t100.0\t100.0\t100.0\t100.0\t100.0\t-"
)
COMPENSATED = (
    "Model\tOverall\tEasy\tHard\tShort\tMedium\tLong\n"
    "model_a\t56.2\t100.0\t12.5\t100.0\t0.0\t62.5\n"
    "model_a_cot\t100.0\t100.0\t100.0\t100.0\t100.0\t-"
)


def write_preds(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("model_a.jsonl", ZERO_SHOT), ("model_a_cot.jsonl", COT)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def test_result_txt_is_what_result_py_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pred = write_preds(tmp_path / "results")
    assert main(["longbench-eval", "--v2", str(pred)]) == 0
    assert (pred / "result.txt").read_text(encoding="utf-8") == RESULT  # no final newline, as result.py
    out = capsys.readouterr().out
    assert out.startswith(RESULT + "\n") and f"wrote {pred / 'result.txt'}" in out
    assert main(["longbench-eval", "--v2", str(pred), "--compensated"]) == 0
    assert (pred / "result.txt").read_text(encoding="utf-8") == COMPENSATED


def test_data_adds_lbevals_figures_counting_items_without_a_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pred = write_preds(tmp_path / "results")
    data = tmp_path / "data.json"
    items = [("1", "easy", "short", "A"), ("2", "hard", "medium", "B"), ("3", "hard", "long", "C"),
             ("4", "easy", "long", "D"), ("5", "easy", "medium", "A")]  # fmt: skip
    data.write_text(
        json.dumps([{"_id": i, "difficulty": d, "length": n, "answer": a} for i, d, n, a in items])
    )
    assert main(["longbench-eval", "--v2", str(pred), "--data", str(data)]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("lbeval (every data item counts; Dropped = no line in the file, counted wrong):")
    # by hand: model_a 2/5 = 40.0 (easy 2/3 = 66.7, medium 0/2, dropped 1: item 5);
    # model_a_cot 2/5 = 40.0 (easy 1/3 = 33.3, hard 1/2 = 50.0, long 0/2, dropped 3: items 3, 4, 5)
    assert out[at + 2].split("\t") == ["model_a", "40.0", "66.7", "0.0", "100.0", "0.0", "50.0", "1"]
    assert out[at + 3].split("\t") == ["model_a_cot", "40.0", "33.3", "50.0", "100.0", "50.0", "0.0", "3"]
    assert (pred / "result.txt").read_text(encoding="utf-8") == RESULT  # the official figures are unchanged


def test_bad_input_is_one_line_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pred = tmp_path / "results"
    pred.mkdir()
    bad = pred / "m.jsonl"
    bad.write_text(json.dumps(ZERO_SHOT[0]) + "\n" + json.dumps({**ZERO_SHOT[1], "answer": "E"}) + "\n")
    assert main(["longbench-eval", "--v2", str(pred)]) == EXIT_DATA
    err = capsys.readouterr().err.strip()
    assert err == f"lbeval longbench-eval: error: {bad}:2:answer: 'E' is not one of A, B, C, D"
    assert not (pred / "result.txt").exists()


def test_v2_options_need_v2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pred = write_preds(tmp_path / "results")
    assert main(["longbench-eval", str(pred), "--compensated"]) == EXIT_USAGE
    assert "add --v2" in capsys.readouterr().err
    assert main(["longbench-eval", "--v2", "--e", str(pred)]) == EXIT_USAGE
