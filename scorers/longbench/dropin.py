"""Drop-in for LongBench's official eval.py: score a folder of `<dataset>.jsonl` prediction files.

Input, as the official script reads it: every file in PRED_DIR whose name ends in "jsonl" is one dataset,
named by the part before the first "." (`qasper.jsonl` -> qasper; `qasper_e.jsonl` is accepted too and
scored as qasper). Each line is one JSON object with `pred` (string), `answers` (list of strings),
`all_classes` (list of strings or null) and, for LongBench-E, `length` (number). As in the official script
the classification datasets use the `all_classes` of the file's last line for every line (LongBench
repeats the same list on each line).

Output: the dict the official script dumps to PRED_DIR/result.json: `{dataset: score}`, or with
LongBench-E `{dataset: {"0-4k": x, "4-8k": y, "8k+": z}}` (NaN for an empty bucket, written `NaN` like the
official `json.dump`). Keys are in file-name order (the official order is whatever `os.listdir` gives).

Where the official script would crash or silently misread, this raises `PredictionFileError` naming the
file, line and field: a file name that is no LongBench dataset, two files for one dataset, a line that is
not a JSON object, a missing or mistyped field, an empty file, a retrieval answer without a paragraph id,
a missing `length` in LongBench-E mode, no prediction file at all.

Speed: rows are scored in chunks by worker processes when there are many (the scores of each row do not
depend on which process computes them, and the dataset sums run in file order afterwards, so the result is
the same float for any number of workers).
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scorers.longbench.normalize import warm_up_jieba
from scorers.longbench.official import (
    BUCKETS,
    DATASET_METRIC,
    base_dataset,
    dataset_score,
    longbench_e_scores,
)
from scorers.longbench.official import score_example as score_one

RESULT_FILE = "result.json"
CHUNK_ROWS = 16
AUTO_PARALLEL_ROWS = 400  # below this many rows, starting processes costs more than it saves
_ZH_METRICS = frozenset({"qa_f1_zh", "rouge_zh"})
_COST_PER_CHAR = {"rouge_zh": 10.0, "qa_f1_zh": 10.0, "rouge": 1.0}


class PredictionFileError(ValueError):
    """Bad prediction data, naming the file, the 1-based line (or None) and the field (or None)."""

    def __init__(self, path: object, line: int | None, field: str | None, message: str) -> None:
        where = (
            str(path) + (f":{line}" if line is not None else "") + (f":{field}" if field is not None else "")
        )
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.field, self.message = path, line, field, message

    def __reduce__(self) -> tuple[Any, ...]:  # keep it picklable across worker processes
        return (PredictionFileError, (self.path, self.line, self.field, self.message))


@dataclass(frozen=True)
class PredictionFile:
    """One parsed `<dataset>.jsonl`: per-line fields, and the file's (last line's) all_classes."""

    key: str
    dataset: str
    path: Path
    lines: list[int]
    preds: list[str]
    answers: list[list[str]]
    lengths: list[float]
    all_classes: list[str] | None


def find_prediction_files(pred_dir: Path) -> list[tuple[str, Path]]:
    """(result key, path) for every "*jsonl" file, in file-name order; errors for unknown or doubled names."""
    if not pred_dir.is_dir():
        raise PredictionFileError(pred_dir, None, None, "not a directory")
    found: dict[str, Path] = {}
    for path in sorted(pred_dir.iterdir()):
        if not path.name.endswith("jsonl") or not path.is_file():
            continue
        key = path.name.split(".")[0]
        try:
            base_dataset(key)
        except KeyError:
            known = ", ".join(sorted(DATASET_METRIC))
            raise PredictionFileError(
                path, None, None, f"unknown dataset {key!r}; expected one of: {known}"
            ) from None
        if key in found:
            raise PredictionFileError(
                path, None, None, f"a second file for dataset {key!r} (first: {found[key].name})"
            )
        found[key] = path
    if not found:
        raise PredictionFileError(pred_dir, None, None, "no <dataset>.jsonl prediction files")
    return list(found.items())


def _string_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _parse_line(
    path: Path, line_no: int, text: str, longbench_e: bool
) -> tuple[str, list[str], list[str] | None, float]:
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PredictionFileError(path, line_no, None, f"not valid JSON ({exc.msg})") from None
    if not isinstance(row, dict):
        raise PredictionFileError(path, line_no, None, "expected a JSON object")
    for name in ("pred", "answers", "all_classes") + (("length",) if longbench_e else ()):
        if name not in row:
            raise PredictionFileError(path, line_no, name, "missing")
    if not isinstance(row["pred"], str):
        raise PredictionFileError(path, line_no, "pred", "must be a string")
    if not _string_list(row["answers"]):
        raise PredictionFileError(path, line_no, "answers", "must be a list of strings")
    if row["all_classes"] is not None and not _string_list(row["all_classes"]):
        raise PredictionFileError(path, line_no, "all_classes", "must be a list of strings or null")
    length = row.get("length", 0) if longbench_e else 0
    if isinstance(length, bool) or not isinstance(length, int | float) or length != length:
        raise PredictionFileError(path, line_no, "length", "must be a number")
    return row["pred"], row["answers"], row["all_classes"], float(length)


def read_prediction_file(key: str, path: Path, longbench_e: bool) -> PredictionFile:
    """Parse and check one prediction file."""
    lines: list[int] = []
    preds: list[str] = []
    answers: list[list[str]] = []
    lengths: list[float] = []
    all_classes: list[str] | None = None
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_no = raw.count(b"\n", 0, exc.start) + 1
        raise PredictionFileError(path, line_no, None, f"not UTF-8 ({exc.reason})") from None
    # universal newlines, as the official `open(..., "r")` reads it (str.splitlines would also split at
    # U+2028 and friends, which JSON strings may hold raw)
    for line_no, line in enumerate(io.StringIO(text, newline=None), start=1):
        pred, answer_list, all_classes, length = _parse_line(path, line_no, line, longbench_e)
        lines.append(line_no)
        preds.append(pred)
        answers.append(answer_list)
        lengths.append(length)
    if not preds:
        raise PredictionFileError(path, None, None, "no predictions")
    return PredictionFile(key, base_dataset(key), path, lines, preds, answers, lengths, all_classes)


def _check_classes(file: PredictionFile) -> None:
    if DATASET_METRIC[file.dataset] == "classification" and file.all_classes is None:
        message = "null on the last line; a classification dataset needs its list of class names"
        raise PredictionFileError(file.path, file.lines[-1], "all_classes", message)


def score_rows(file: PredictionFile, start: int = 0, stop: int | None = None) -> list[float]:
    """Official per-example scores of rows [start, stop) of a file (errors name the row's line)."""
    stop = len(file.preds) if stop is None else stop
    _check_classes(file)
    scores = []
    for k in range(start, stop):
        try:
            scores.append(score_one(file.dataset, file.preds[k], file.answers[k], file.all_classes))
        except ValueError as exc:
            raise PredictionFileError(file.path, file.lines[k], "answers", str(exc)) from None
    return scores


@dataclass(frozen=True)
class ScoreTask:
    """One chunk of rows for a worker process: the rows themselves (`rows`: a PredictionFile holding only them)
    and where they sit in their file (`index` in the list scored, `start` row), so a task needs nothing else."""

    index: int
    start: int
    rows: PredictionFile


def score_task(task: ScoreTask) -> list[float]:
    """What a worker process computes: the official scores of one task's rows."""
    return score_rows(task.rows)


def _rows(file: PredictionFile, start: int, stop: int) -> PredictionFile:
    return replace(
        file,
        lines=file.lines[start:stop],
        preds=file.preds[start:stop],
        answers=file.answers[start:stop],
        lengths=file.lengths[start:stop],
    )


def score_tasks(files: Sequence[PredictionFile]) -> list[ScoreTask]:
    """Row chunks of every file, the costliest first so that the workers finish together."""
    tasks = []
    for index, file in enumerate(files):
        for start in range(0, len(file.preds), CHUNK_ROWS):
            stop = min(start + CHUNK_ROWS, len(file.preds))
            tasks.append((_cost(file, start, stop), ScoreTask(index, start, _rows(file, start, stop))))
    return [task for _, task in sorted(tasks, key=lambda pair: -pair[0])]


def _cost(file: PredictionFile, start: int, stop: int) -> float:
    """Rough CPU cost of scoring rows, per character: jieba segmentation dominates, then ROUGE."""
    weight = _COST_PER_CHAR.get(DATASET_METRIC[file.dataset], 0.3)
    return weight * sum(len(file.preds[k]) + sum(map(len, file.answers[k])) for k in range(start, stop))


def _worker_count(workers: int | None, rows: int) -> int:
    if workers is not None:
        return max(1, workers)
    if rows < AUTO_PARALLEL_ROWS:
        return 1
    return max(
        1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8)
    )


def score_files(files: Sequence[PredictionFile], workers: int | None = None) -> list[list[float]]:
    """Per-example scores of every file, in process or in `workers` processes (same numbers either way)."""
    if any(DATASET_METRIC[f.dataset] in _ZH_METRICS for f in files):
        warm_up_jieba()  # once, before forking, so that the workers inherit the loaded dictionary
    count = _worker_count(workers, sum(len(f.preds) for f in files))
    if count == 1:
        return [score_rows(f) for f in files]
    for f in files:
        _check_classes(f)  # against the whole file's last line (a task holds only its own rows)
    tasks = score_tasks(files)
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    with ProcessPoolExecutor(count, context) as pool:
        results = list(pool.map(score_task, tasks))
    scores = {(task.index, task.start): values for task, values in zip(tasks, results, strict=True)}
    return [
        [s for start in range(0, len(f.preds), CHUNK_ROWS) for s in scores[(index, start)]]
        for index, f in enumerate(files)
    ]


def evaluate_folder(pred_dir: Path, longbench_e: bool, *, workers: int | None = None) -> dict[str, Any]:
    """The result.json content the official eval.py writes for this folder (`--e`: LongBench-E buckets)."""
    files = [
        read_prediction_file(key, path, longbench_e) for key, path in find_prediction_files(Path(pred_dir))
    ]
    all_scores = score_files(files, workers)
    result: dict[str, Any] = {}
    for file, scores in zip(files, all_scores, strict=True):
        result[file.key] = longbench_e_scores(scores, file.lengths) if longbench_e else dataset_score(scores)
    return result


def write_result(pred_dir: Path, result: dict[str, Any]) -> Path:
    """PRED_DIR/result.json, formatted like the official (`json.dump(..., ensure_ascii=False, indent=4)`)."""
    out = Path(pred_dir) / RESULT_FILE
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(result, handle, ensure_ascii=False, indent=4)
    return out


def format_table(result: dict[str, Any]) -> str:
    """A plain-text table of a result dict (one row per dataset)."""
    bucketed = any(isinstance(v, dict) for v in result.values())
    columns = list(BUCKETS) if bucketed else ["score"]
    width = max([len("dataset"), *map(len, result)])
    lines = ["dataset".ljust(width) + "".join(c.rjust(9) for c in columns)]
    for key, value in result.items():
        values = [value[c] for c in columns] if bucketed else [value]
        lines.append(key.ljust(width) + "".join(f"{v:9.2f}" for v in values))
    return "\n".join(lines)
