"""The eval.py drop-in over a folder: parity folders, worker independence, the official quirks, errors."""

from __future__ import annotations

import json
import math
import multiprocessing
import shutil
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from scorers.longbench import PredictionFileError, evaluate_folder, format_table, write_result
from scorers.longbench.dropin import (
    find_prediction_files,
    read_prediction_file,
    score_rows,
    score_task,
    score_tasks,
)
from tests.scorers.longbench import reference_eval

DATA = Path(__file__).resolve().parents[2] / "data" / "scorers"
FOLDERS = [("parity_plain", False), ("parity_e", True)]


def same(a: Any, b: Any) -> bool:
    """Equal dicts where NaN equals NaN (json text comparison does exactly that)."""
    return json.dumps(a, sort_keys=False) == json.dumps(b, sort_keys=False)


def expected(folder: str) -> dict[str, Any]:
    return dict(json.loads((DATA / folder / "expected_result.json").read_text(encoding="utf-8")))


@pytest.mark.parametrize(("folder", "longbench_e"), FOLDERS)
def test_parity_folders(folder: str, longbench_e: bool) -> None:
    result = evaluate_folder(DATA / folder, longbench_e, workers=1)
    assert list(result) == list(expected(folder))
    assert same(result, expected(folder))


@pytest.mark.parametrize(("folder", "longbench_e"), FOLDERS)
def test_expected_results_are_what_the_reference_derives(folder: str, longbench_e: bool) -> None:
    """The stored golden files still equal the independent reference implementation's output."""
    assert same(reference_eval.evaluate(DATA / folder, longbench_e), expected(folder))


def test_parity_folders_cover_every_dataset_and_bucket() -> None:
    plain = expected("parity_plain")
    assert len(plain) == 21
    e = expected("parity_e")
    assert len(e) == 13
    assert all(list(v) == ["0-4k", "4-8k", "8k+"] for v in e.values())
    assert math.isnan(e["passage_count"]["8k+"])


def test_worker_processes_give_identical_results() -> None:
    serial = evaluate_folder(DATA / "parity_plain", False, workers=1)
    parallel = evaluate_folder(DATA / "parity_plain", False, workers=2)
    assert same(serial, parallel)


def test_a_worker_needs_nothing_but_its_task() -> None:
    # a worker process that inherited nothing (spawn, no initializer) scores each task's rows exactly as the
    # file's rows score in this process: what a worker needs travels in its task, not in a module global
    files = [read_prediction_file(k, p, False) for k, p in find_prediction_files(DATA / "parity_plain")]
    tasks = score_tasks(files)
    assert len({t.index for t in tasks}) == len(files) and len(tasks) > len(files)  # several chunks per file
    with ProcessPoolExecutor(2, multiprocessing.get_context("spawn")) as pool:
        got = list(pool.map(score_task, tasks))
    for task, scores in zip(tasks, got, strict=True):
        stop = task.start + len(scores)
        assert scores == score_rows(files[task.index], task.start, stop) and len(task.rows.preds) == len(
            scores
        )


def test_write_result_formats_like_json_dump_indent_4(tmp_path: Path) -> None:
    out = write_result(tmp_path, {"qasper": 12.5, "trec": {"0-4k": float("nan"), "4-8k": 1.0, "8k+": 0.0}})
    assert out == tmp_path / "result.json"
    text = out.read_text(encoding="utf-8")
    assert text == (
        '{\n    "qasper": 12.5,\n    "trec": {\n        "0-4k": NaN,\n        "4-8k": 1.0,\n        "8k+": 0.0\n    }\n}'
    )
    table = format_table({"qasper": 12.5, "lcc": 100.0})
    assert table.splitlines() == ["dataset    score", "qasper     12.50", "lcc       100.00"]


def _write(folder: Path, name: str, rows: list[Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


ROW = {"pred": "Paris", "answers": ["Paris"], "all_classes": None, "length": 100}


def test_all_classes_come_from_the_last_line_like_the_official(tmp_path: Path) -> None:
    rows = [
        {"pred": "City", "answers": ["City"], "all_classes": ["Town"]},
        {"pred": "Town", "answers": ["Town"], "all_classes": ["City", "Town"]},
    ]
    _write(tmp_path, "trec.jsonl", rows)
    # both lines are scored with ["City", "Town"]: 1.0 each; the first line's own list would give 0.0
    assert evaluate_folder(tmp_path, False) == {"trec": 100.0}


def test_longbench_e_names_other_files_and_order(tmp_path: Path) -> None:
    _write(tmp_path, "qasper_e.jsonl", [ROW])
    _write(tmp_path, "hotpotqa.jsonl", [ROW, {**ROW, "pred": "London", "length": 9000}])
    (tmp_path / "result.json").write_text("{}", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    result = evaluate_folder(tmp_path, True)
    assert list(result) == ["hotpotqa", "qasper_e"]
    assert result["hotpotqa"]["0-4k"] == 100.0 and result["hotpotqa"]["8k+"] == 0.0
    assert math.isnan(result["hotpotqa"]["4-8k"])
    assert evaluate_folder(tmp_path, False) == {"hotpotqa": 50.0, "qasper_e": 100.0}


BAD_LINES = [
    ("not json", 2, None, "not valid JSON"),
    ("[1, 2]", 2, None, "JSON object"),
    ("", 2, None, "not valid JSON"),
    (json.dumps({"answers": ["a"], "all_classes": None}), 2, "pred", "missing"),
    (json.dumps({"pred": "a", "all_classes": None}), 2, "answers", "missing"),
    (json.dumps({"pred": "a", "answers": ["a"]}), 2, "all_classes", "missing"),
    (json.dumps({"pred": None, "answers": ["a"], "all_classes": None}), 2, "pred", "string"),
    (json.dumps({"pred": "a", "answers": "a", "all_classes": None}), 2, "answers", "list of strings"),
    (json.dumps({"pred": "a", "answers": [1], "all_classes": None}), 2, "answers", "list of strings"),
    (json.dumps({"pred": "a", "answers": ["a"], "all_classes": "x"}), 2, "all_classes", "list of strings"),
]


@pytest.mark.parametrize(("line", "line_no", "field", "message"), BAD_LINES)
def test_bad_lines_name_file_line_and_field(
    tmp_path: Path, line: str, line_no: int, field: str | None, message: str
) -> None:
    path = _write(tmp_path, "qasper.jsonl", [ROW, line])
    with pytest.raises(PredictionFileError, match=message) as info:
        evaluate_folder(tmp_path, False)
    assert (info.value.path, info.value.line, info.value.field) == (path, line_no, field)
    assert str(info.value).startswith(f"{path}:{line_no}")


def test_longbench_e_needs_a_numeric_length(tmp_path: Path) -> None:
    path = _write(tmp_path, "qasper.jsonl", [ROW, {k: v for k, v in ROW.items() if k != "length"}])
    assert evaluate_folder(tmp_path, False) == {"qasper": 100.0}
    with pytest.raises(PredictionFileError) as info:
        evaluate_folder(tmp_path, True)
    assert (info.value.path, info.value.line, info.value.field) == (path, 2, "length")
    _write(tmp_path, "qasper.jsonl", [{**ROW, "length": "long"}])
    with pytest.raises(PredictionFileError, match="number"):
        evaluate_folder(tmp_path, True)


def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(PredictionFileError, match="no <dataset>.jsonl"):
        evaluate_folder(tmp_path, False)
    with pytest.raises(PredictionFileError, match="not a directory"):
        evaluate_folder(tmp_path / "missing", False)
    bad = _write(tmp_path, "squad.jsonl", [ROW])
    with pytest.raises(PredictionFileError, match="unknown dataset 'squad'") as info:
        evaluate_folder(tmp_path, False)
    assert info.value.path == bad and info.value.line is None
    bad.unlink()
    _write(tmp_path, "qasper.jsonl", [ROW])
    _write(tmp_path, "qasper.old.jsonl", [ROW])
    with pytest.raises(PredictionFileError, match="second file for dataset 'qasper'"):
        evaluate_folder(tmp_path, False)
    (tmp_path / "qasper.old.jsonl").unlink()
    _write(tmp_path, "hotpotqa.jsonl", [])
    with pytest.raises(PredictionFileError, match="no predictions"):
        evaluate_folder(tmp_path, False)


def test_scoring_errors_name_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "passage_retrieval_en.jsonl", [{**ROW, "answers": ["Paragraph 1"]}, ROW])
    with pytest.raises(PredictionFileError, match="names no paragraph") as info:
        evaluate_folder(tmp_path, False)
    assert (info.value.path, info.value.line, info.value.field) == (path, 2, "answers")
    path.unlink()
    path = _write(tmp_path, "trec.jsonl", [ROW, ROW])
    with pytest.raises(PredictionFileError, match="class names") as info:
        evaluate_folder(tmp_path, False)
    assert (info.value.line, info.value.field) == (2, "all_classes")


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "qasper.jsonl"
    path.write_bytes((json.dumps(ROW) + "\n").encode() * 3 + b'{"pred": "\xff"}\n')
    with pytest.raises(PredictionFileError, match="UTF-8") as info:
        evaluate_folder(tmp_path, False)
    assert info.value.line == 4


def test_line_breaks_like_text_mode(tmp_path: Path) -> None:
    # CRLF and a lone CR end lines (universal newlines); U+2028 inside a JSON string does not
    rows = [{**ROW, "pred": "Paris\u2028x"}, ROW, ROW]
    text = json.dumps(rows[0], ensure_ascii=False) + "\r\n" + json.dumps(ROW) + "\r" + json.dumps(ROW) + "\n"
    (tmp_path / "qasper.jsonl").write_bytes(text.encode("utf-8"))
    # three rows; U+2028 is whitespace to str.split: [paris, x] vs [paris] -> 2/3; then 1 and 1: 88.89
    assert evaluate_folder(tmp_path, False) == {"qasper": 88.89}


def test_errors_survive_worker_processes(tmp_path: Path) -> None:
    shutil.copy(DATA / "parity_plain" / "qasper.jsonl", tmp_path / "qasper.jsonl")
    _write(tmp_path, "passage_retrieval_en.jsonl", [{**ROW, "answers": ["no id"]}])
    with pytest.raises(PredictionFileError, match="names no paragraph") as info:
        evaluate_folder(tmp_path, False, workers=2)
    assert info.value.line == 1
