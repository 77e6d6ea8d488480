"""The result.py drop-in: result.txt text, compensated, lbeval figures with --data, errors, pred.py lines."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from scorers.longbench_v2 import PredictionFileError, evaluate_folder, format_result, prediction_line
from scorers.longbench_v2.dropin import format_lbeval, main, read_expected, result_name

# (_id, difficulty, length, answer, response): the same eight items as test_score.ITEMS
ROWS = [
    ("1", "easy", "short", "A", "The correct answer is (A)"),
    ("2", "easy", "medium", "B", "The correct answer is (C)"),
    ("3", "hard", "long", "C", "**The correct answer is (C)**"),
    ("4", "hard", "short", "D", "I cannot tell."),
    ("5", "hard", "medium", "A", "The correct answer is A"),
    ("6", "easy", "long", "B", ""),
    ("7", "hard", "short", "B", "The correct answer is (B)"),
    ("8", "hard", "long", "D", "The correct answer is (A)"),
]
PREDS = ["A", "C", "C", None, "A", None, "B", "A"]  # worked out by hand from the responses


def record(
    item_id: str, difficulty: str, length: str, answer: str, response: str, pred: Any
) -> dict[str, Any]:
    """A line as pred.py writes it (context cut to 1000 characters; here short)."""
    return {
        "_id": item_id, "domain": "Single-Document QA", "sub_domain": "Literary", "difficulty": difficulty,
        "length": length, "question": "Q?", "choice_A": "a", "choice_B": "b", "choice_C": "c", "choice_D": "d",
        "answer": answer, "context": "text", "response": response, "pred": pred, "judge": pred == answer,
    }  # fmt: skip


def records() -> list[dict[str, Any]]:
    return [record(*row, pred) for row, pred in zip(ROWS, PREDS, strict=True)]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")
    return path


def write_data(path: Path) -> Path:
    """data.json with the eight items plus 9 (easy, short, A) and 10 (hard, medium, C), which have no line."""
    keys = [(r[0], r[1], r[2], r[3]) for r in ROWS] + [
        ("9", "easy", "short", "A"),
        ("10", "hard", "medium", "C"),
    ]
    rows = [{"_id": i, "difficulty": d, "length": n, "answer": a, "context": "x"} for i, d, n, a in keys]
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


# Hand-computed (see test_score.FIGURE_CASES for the arithmetic): 4/8 1/3 3/5 2/3 1/2 1/3
OFFICIAL_LINE = "GLM-4-9B-Chat\t50.0\t33.3\t60.0\t66.7\t50.0\t33.3"
# compensated: 4.5/8=56.25->56.2, 1.25/3, 3.25/5, 2.25/3, 1/2, 1.25/3
COMPENSATED_LINE = "GLM-4-9B-Chat\t56.2\t41.7\t65.0\t75.0\t50.0\t41.7"
HEADER = "Model\tOverall\tEasy\tHard\tShort\tMedium\tLong"


def test_result_txt_text(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "results" / "GLM-4-9B-Chat.jsonl", records())
    # a second run: only items 1 and 2 -> 1/2 overall, easy 1/2; no hard, medium 0/1, no long
    write_jsonl(tmp_path / "results" / "GLM-4-9B-Chat_cot.jsonl", records()[:2])
    text = format_result(evaluate_folder(tmp_path / "results"))
    assert text == f"{HEADER}\n{OFFICIAL_LINE}\nGLM-4-9B-Chat_cot\t50.0\t50.0\t-\t100.0\t0.0\t-"


def test_compensated(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "m.jsonl", records())
    text = format_result(evaluate_folder(tmp_path, compensated=True))
    assert text == f"{HEADER}\n{COMPENSATED_LINE.replace('GLM-4-9B-Chat', 'm')}"


def test_json_array_file_and_single_line_file(tmp_path: Path) -> None:
    (tmp_path / "GLM-4-9B-Chat.json").write_text(json.dumps(records(), indent=1), encoding="utf-8")
    write_jsonl(tmp_path / "one.jsonl", records()[:1])  # result.py would iterate the dict's keys and crash
    text = format_result(evaluate_folder(tmp_path))
    assert text.splitlines() == [HEADER, OFFICIAL_LINE, "one\t100.0\t100.0\t-\t100.0\t-\t-"]


def test_other_files_are_ignored_and_names_drop_the_last_extension(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.b.jsonl", records())
    (tmp_path / "notes.txt").write_text("not a prediction file", encoding="utf-8")
    (tmp_path / "sub.jsonl").mkdir()
    assert [r.name for r in evaluate_folder(tmp_path)] == ["a.b"]
    assert [result_name(n) for n in ("m.jsonl", "m_rag_3.jsonl", "noext")] == ["m", "m_rag_3", ""]


def test_lbeval_figures_count_items_missing_from_the_file(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "results" / "m.jsonl", records())
    expected = read_expected(write_data(tmp_path / "data.json"))
    results = evaluate_folder(tmp_path / "results", expected=expected)
    assert format_result(results) == f"{HEADER}\n{OFFICIAL_LINE.replace('GLM-4-9B-Chat', 'm')}"
    # items 9 and 10 count as wrong: 4/10 1/4 3/6 2/4 1/3 1/3
    assert format_lbeval(results) == f"{HEADER}\tDropped\nm\t40.0\t25.0\t50.0\t50.0\t33.3\t33.3\t2"
    assert results[0].scores.differ


def test_main_writes_result_txt_and_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_jsonl(tmp_path / "results" / "GLM-4-9B-Chat.jsonl", records())
    out = tmp_path / "result.txt"
    data = write_data(tmp_path / "data.json")
    assert main([str(tmp_path / "results"), "--out", str(out), "--data", str(data)]) == 0
    assert out.read_bytes() == f"{HEADER}\n{OFFICIAL_LINE}".encode()  # no final newline, like result.py
    printed = capsys.readouterr().out
    assert printed.startswith(f"{HEADER}\n{OFFICIAL_LINE}\n")
    assert printed.rstrip().endswith("GLM-4-9B-Chat\t40.0\t25.0\t50.0\t50.0\t33.3\t33.3\t2")


def test_main_reports_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_jsonl(tmp_path / "m.jsonl", ['{"_id": "1"'])
    assert main([str(tmp_path), "--out", str(tmp_path / "r.txt")]) == 2
    assert (
        capsys.readouterr().err
        == f"error: {tmp_path / 'm.jsonl'}:1: not valid JSON (Expecting ',' delimiter)\n"
    )
    assert not (tmp_path / "r.txt").exists()


def _without(row: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != name}


GOOD = records()[0]
BAD_LINES: list[tuple[list[Any], int | None, str | None, str]] = [
    # (lines of m.jsonl, line, field, message fragment)
    ([GOOD, "[1, 2]"], 2, None, "expected a JSON object"),
    ([GOOD, "{oops"], 2, None, "not valid JSON"),
    ([GOOD, "", GOOD], 2, None, "blank line"),
    ([_without(GOOD, "response")], 1, "response", "missing"),
    ([_without(GOOD, "_id")], 1, "_id", "missing"),
    ([{**GOOD, "_id": ""}], 1, "_id", "empty"),
    ([{**GOOD, "response": None}], 1, "response", "must be a string, got NoneType"),
    ([{**GOOD, "difficulty": "medium"}], 1, "difficulty", "'medium' is not one of easy, hard"),
    ([{**GOOD, "length": "tiny"}], 1, "length", "is not one of short, medium, long"),
    ([{**GOOD, "answer": "a"}], 1, "answer", "is not one of A, B, C, D"),
    ([{**GOOD, "pred": "B"}], 1, "pred", "official extraction of 'response' gives 'A'"),
    ([{**GOOD, "judge": False}], 1, "judge", "is False but pred 'A' vs answer gives True"),
    ([{**GOOD, "judge": 1}], 1, "judge", "is 1"),
    ([GOOD, GOOD], 2, "_id", "'1' already at line 1"),
]


@pytest.mark.parametrize(("lines", "line", "field", "fragment"), BAD_LINES)
def test_bad_lines_name_file_line_and_field(
    tmp_path: Path, lines: list[Any], line: int | None, field: str | None, fragment: str
) -> None:
    path = write_jsonl(tmp_path / "m.jsonl", lines)
    with pytest.raises(PredictionFileError) as info:
        evaluate_folder(tmp_path)
    error = info.value
    assert (error.path, error.line, error.field) == (path, line, field)
    assert fragment in error.message
    assert str(error).startswith(f"{path}:{line}: " + (f"field '{field}': " if field else ""))


def test_bad_files_and_folders(tmp_path: Path) -> None:
    cases: list[tuple[Path, str]] = []
    (tmp_path / "empty").mkdir()
    cases.append((tmp_path / "empty", "no *.jsonl or *.json prediction files"))
    cases.append((tmp_path / "missing", "not a directory"))
    write_jsonl(tmp_path / "blank" / "m.jsonl", [])
    cases.append((tmp_path / "blank", "no predictions"))
    (tmp_path / "latin").mkdir()
    (tmp_path / "latin" / "m.jsonl").write_bytes(b'{"_id": "caf\xe9"}\n')
    cases.append((tmp_path / "latin", "not UTF-8"))
    for folder, fragment in cases:
        with pytest.raises(PredictionFileError, match=re.escape(fragment)):
            evaluate_folder(folder)


def test_json_array_errors_name_the_element(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps([GOOD, _without(GOOD, "answer")]), encoding="utf-8")
    with pytest.raises(PredictionFileError) as info:
        evaluate_folder(tmp_path)
    assert str(info.value) == f"{path}: element 1: field 'answer': missing"


def test_data_mismatches(tmp_path: Path) -> None:
    data = write_data(tmp_path / "data.json")
    cases = [
        ({**GOOD, "_id": "99"}, "_id", "'99' is not in the data"),
        ({**GOOD, "difficulty": "hard"}, "difficulty", "'hard' but the data says 'easy'"),
    ]
    for row, field, message in cases:
        write_jsonl(tmp_path / "results" / "m.jsonl", [row])
        with pytest.raises(PredictionFileError) as info:
            evaluate_folder(tmp_path / "results", expected=read_expected(data))
        assert (info.value.line, info.value.field, info.value.message) == (1, field, message)
    data.write_text(json.dumps([{"_id": "1", "difficulty": "easy", "length": "long"}]), encoding="utf-8")
    with pytest.raises(PredictionFileError, match="element 0: field 'answer': missing"):
        read_expected(data)


DATA_ROW = {
    "_id": "lbv2mini-x", "domain": "D", "sub_domain": "S", "difficulty": "hard", "length": "long",
    "question": "Q", "choice_A": "a", "choice_B": "b", "choice_C": "c", "choice_D": "d", "answer": "B",
    "context": "é" * 1500,
}  # fmt: skip


def test_prediction_line_is_what_pred_py_writes() -> None:
    line = prediction_line(DATA_ROW, "  The correct answer is (B)\n", cot_output=" Think. ")
    assert line is not None and line.endswith("}\n") and "é" in line  # ensure_ascii=False
    row = json.loads(line)
    assert list(row) == [*DATA_ROW, "response_cot", "response", "pred", "judge"]
    assert row["context"] == "é" * 1000
    assert (row["response_cot"], row["response"], row["pred"], row["judge"]) == (
        "Think.", "The correct answer is (B)", "B", True,
    )  # fmt: skip
    assert prediction_line(DATA_ROW, "") is None
    assert prediction_line(DATA_ROW, "The correct answer is (B)", cot_output="") is None


def test_prediction_lines_read_back(tmp_path: Path) -> None:
    lines = [
        prediction_line(DATA_ROW, "The correct answer is (C)"),
        prediction_line(DATA_ROW | {"_id": "y"}, "x"),
    ]
    (tmp_path / "m.jsonl").write_text("".join(line or "" for line in lines), encoding="utf-8")
    # two hard/long items, both wrong: 0/2 everywhere they are counted
    assert format_result(evaluate_folder(tmp_path)) == f"{HEADER}\nm\t0.0\t-\t0.0\t-\t-\t0.0"
