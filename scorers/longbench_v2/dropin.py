"""Drop-in for LongBench v2's official result.py (THUDM/LongBench @ 2e00731f): score a folder of pred.py files.

Input, as pred.py writes it: one file per run, `<model>.jsonl` (`_cot`, `_no_context`, `_rag_N` variants),
one JSON object per line with the data fields (`_id, domain, sub_domain, difficulty, length, question,
choice_A..D, answer`, `context` cut to its first 1000 characters), `response_cot` (CoT runs), `response`
(the stripped model output), `pred` (extracted letter or null) and `judge` (pred == answer). Like result.py,
a file that parses as one JSON array of such objects is read as that array.

Output: result.py's `result.txt` text: the line `Model\\tOverall\\tEasy\\tHard\\tShort\\tMedium\\tLong`, then
per file its name without the last extension and the six figures `str(round(100 * points / n, 1))`,
tab-separated, lines joined by "\\n" with no final newline. `compensated=True` is result.py with its
`compensated` constant set to True (an unextractable answer scores 0.25).

Where this differs from result.py, on purpose:
- the verdict is computed from `response` with the official extraction; a file's `pred` / `judge`, when
  present, must agree with it (else an error: the file was not scored by the official rule);
- only `*.jsonl` / `*.json` regular files are read, in file-name order (result.py reads every entry of the
  folder, in `os.listdir` order, and crashes on anything else);
- bad input raises `PredictionFileError` naming the file, the line (or array element) and the field, where
  result.py would crash (empty file, one-line file, blank line, missing field, empty bucket -> division by
  zero) or silently misfile (a `difficulty` not "easy" counts as hard, a `length` not short/medium as long);
  a duplicated `_id` is an error too (result.py would count it twice);
- an empty bucket (no "medium" items, say) prints `-` where result.py divides by zero.

Command line: `python -m scorers.longbench_v2 [PRED_DIR] [--out result.txt] [--compensated] [--data data.json]`
(defaults as result.py: ./results, ./result.txt); the text is also printed.

lbeval's figures (`expected=` / `--data data.json`): items of the data missing from a file (pred.py writes
none for an empty output) count as wrong; the report says how many were dropped.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scorers.longbench_v2.extract import extract_answer
from scorers.longbench_v2.score import (
    DIFFICULTIES,
    LENGTHS,
    LETTERS,
    Accuracy,
    ExpectedItem,
    ItemResult,
    Scores,
    score_items,
    with_missing,
)

RESULT_FILE = "result.txt"
HEADER = "Model\tOverall\tEasy\tHard\tShort\tMedium\tLong"
SUFFIXES = (".jsonl", ".json")
DATA_FIELDS = (
    "_id", "domain", "sub_domain", "difficulty", "length", "question",
    "choice_A", "choice_B", "choice_C", "choice_D", "answer", "context",
)  # fmt: skip
OFFICIAL_CONTEXT_CHARS = 1000


class PredictionFileError(ValueError):
    """Bad prediction or data file: the file, the 1-based line or 0-based array element, the field."""

    def __init__(
        self,
        path: object,
        line: int | None,
        field: str | None,
        message: str,
        *,
        element: int | None = None,
    ) -> None:
        self.path, self.line, self.field, self.message, self.element = path, line, field, message, element
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else str(self.path)
        if self.element is not None:
            where += f": element {self.element}"
        if self.field is not None:
            where += f": field {self.field!r}"
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class Where:
    """Where a record sits: a JSONL line (1-based) or a JSON array element (0-based)."""

    line: int | None = None
    element: int | None = None

    def error(self, path: Path, field: str | None, message: str) -> PredictionFileError:
        return PredictionFileError(path, self.line, field, message, element=self.element)


@dataclass(frozen=True)
class PredictionFile:
    """One parsed prediction file: result.py's name for it, its items and where each came from."""

    name: str
    path: Path
    items: list[ItemResult]
    where: list[Where]


@dataclass(frozen=True)
class FileScores:
    name: str
    path: Path
    scores: Scores


def result_name(file_name: str) -> str:
    """result.py's `'.'.join(file.split('.')[:-1])`: the name without its last extension."""
    return ".".join(file_name.split(".")[:-1])


def find_prediction_files(pred_dir: Path) -> list[Path]:
    if not pred_dir.is_dir():
        raise PredictionFileError(pred_dir, None, None, "not a directory")
    paths = sorted(p for p in pred_dir.iterdir() if p.is_file() and p.name.endswith(SUFFIXES))
    if not paths:
        raise PredictionFileError(pred_dir, None, None, "no *.jsonl or *.json prediction files")
    return paths


def read_text(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise PredictionFileError(path, line, None, f"not UTF-8 ({exc.reason})") from None


def load_records(path: Path) -> list[tuple[Where, object]]:
    """The file's records: a JSON array's elements, else one JSON value per line (universal newlines)."""
    text = read_text(path)
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    records: list[tuple[Where, object]] = []
    if isinstance(whole, list):
        records = [(Where(element=k), value) for k, value in enumerate(whole)]
        text = ""
    for line_no, line in enumerate(io.StringIO(text, newline=None), start=1):
        if not line.strip():
            raise PredictionFileError(path, line_no, None, "blank line (result.py stops here too)")
        try:
            records.append((Where(line=line_no), json.loads(line)))
        except json.JSONDecodeError as exc:
            raise PredictionFileError(path, line_no, None, f"not valid JSON ({exc.msg})") from None
    if not records:
        raise PredictionFileError(path, None, None, "no predictions (result.py divides by zero)")
    return records


def _string_field(path: Path, where: Where, record: Mapping[str, object], name: str) -> str:
    if name not in record:
        raise where.error(path, name, "missing")
    value = record[name]
    if not isinstance(value, str):
        raise where.error(path, name, f"must be a string, got {type(value).__name__}")
    return value


def _choice_field(
    path: Path, where: Where, record: Mapping[str, object], name: str, allowed: Sequence[str]
) -> str:
    value = _string_field(path, where, record, name)
    if value not in allowed:
        raise where.error(path, name, f"{value!r} is not one of {', '.join(allowed)}")
    return value


def _check_recorded_verdict(
    path: Path, where: Where, record: Mapping[str, object], pred: str | None, judge: bool
) -> None:
    """A file's own pred / judge, when present, must be what the official extraction gives."""
    if "pred" in record and record["pred"] != pred:
        message = f"is {record['pred']!r} but the official extraction of 'response' gives {pred!r}"
        raise where.error(path, "pred", message)
    if "judge" in record and (not isinstance(record["judge"], bool) or record["judge"] != judge):
        message = f"is {record['judge']!r} but pred {pred!r} vs answer gives {judge!r}"
        raise where.error(path, "judge", message)


def parse_record(path: Path, where: Where, record: object) -> ItemResult:
    """One pred.py record, checked, scored from its `response`."""
    if not isinstance(record, dict):
        raise where.error(path, None, f"expected a JSON object, got {type(record).__name__}")
    item_id = _string_field(path, where, record, "_id")
    if not item_id:
        raise where.error(path, "_id", "empty")
    difficulty = _choice_field(path, where, record, "difficulty", DIFFICULTIES)
    length = _choice_field(path, where, record, "length", LENGTHS)
    answer = _choice_field(path, where, record, "answer", LETTERS)
    pred = extract_answer(_string_field(path, where, record, "response"))
    _check_recorded_verdict(path, where, record, pred, pred == answer)
    return ItemResult(item_id, difficulty, length, answer, pred, pred == answer)


def read_prediction_file(path: Path) -> PredictionFile:
    items: list[ItemResult] = []
    wheres: list[Where] = []
    first_seen: dict[str, Where] = {}
    for where, record in load_records(path):
        item = parse_record(path, where, record)
        if item.id in first_seen:
            seen = first_seen[item.id]
            at = f"line {seen.line}" if seen.line is not None else f"element {seen.element}"
            raise where.error(path, "_id", f"{item.id!r} already at {at}")
        first_seen[item.id] = where
        items.append(item)
        wheres.append(where)
    return PredictionFile(result_name(path.name), path, items, wheres)


def read_expected(path: Path) -> list[ExpectedItem]:
    """The `_id, difficulty, length, answer` of every row of a LongBench v2 data.json (a JSON array)."""
    try:
        rows = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise PredictionFileError(path, exc.lineno, None, f"not valid JSON ({exc.msg})") from None
    if not isinstance(rows, list):
        raise PredictionFileError(path, None, None, "expected a JSON array of rows")
    expected: dict[str, ExpectedItem] = {}
    for k, row in enumerate(rows):
        where = Where(element=k)
        if not isinstance(row, dict):
            raise where.error(path, None, "expected a JSON object")
        item = ExpectedItem(
            _string_field(path, where, row, "_id"),
            _choice_field(path, where, row, "difficulty", DIFFICULTIES),
            _choice_field(path, where, row, "length", LENGTHS),
            _choice_field(path, where, row, "answer", LETTERS),
        )
        if item.id in expected:
            raise where.error(path, "_id", f"{item.id!r} appears twice")
        expected[item.id] = item
    return list(expected.values())


def check_against_expected(file: PredictionFile, expected: Sequence[ExpectedItem]) -> None:
    """Every item of the file is an item of the data, with the data's difficulty, length and answer."""
    by_id = {e.id: e for e in expected}
    for item, where in zip(file.items, file.where, strict=True):
        want = by_id.get(item.id)
        if want is None:
            raise where.error(file.path, "_id", f"{item.id!r} is not in the data")
        for name in ("difficulty", "length", "answer"):
            if getattr(item, name) != getattr(want, name):
                message = f"{getattr(item, name)!r} but the data says {getattr(want, name)!r}"
                raise where.error(file.path, name, message)


def evaluate_folder(
    pred_dir: Path, *, compensated: bool = False, expected: Sequence[ExpectedItem] | None = None
) -> list[FileScores]:
    """Official (and, with `expected`, lbeval) scores of every prediction file, in file-name order."""
    results = []
    for path in find_prediction_files(Path(pred_dir)):
        file = read_prediction_file(path)
        items = file.items
        if expected is not None:
            check_against_expected(file, expected)
            items = with_missing(items, expected)
        results.append(FileScores(file.name, path, score_items(items, compensated=compensated)))
    return results


def _figure(value: float | None) -> str:
    return "-" if value is None else str(value)


def format_row(name: str, accuracy: Accuracy) -> str:
    return "\t".join([name, *(_figure(bucket.official()) for bucket in accuracy.buckets())])


def format_result(results: Sequence[FileScores]) -> str:
    """result.txt exactly as result.py writes it (official figures)."""
    return "\n".join([HEADER, *(format_row(r.name, r.scores.official) for r in results)])


def format_lbeval(results: Sequence[FileScores]) -> str:
    """lbeval's figures (every data item counts), same rounding, with the number of dropped items."""
    lines = [HEADER + "\tDropped"]
    lines += [format_row(r.name, r.scores.lbeval) + f"\t{r.scores.dropped['overall']}" for r in results]
    return "\n".join(lines)


def prediction_line(row: Mapping[str, str], output: str, *, cot_output: str | None = None) -> str | None:
    """The line pred.py appends for a data row and its raw model output(s); None where it writes none."""
    if output == "" or cot_output == "":
        return None
    record: dict[str, object] = {name: row[name] for name in DATA_FIELDS}
    record["context"] = row["context"][:OFFICIAL_CONTEXT_CHARS]
    if cot_output is not None:
        record["response_cot"] = cot_output.strip()
    response = output.strip()
    pred = extract_answer(response)
    record.update(response=response, pred=pred, judge=pred == row["answer"])
    return json.dumps(record, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="LongBench v2 result.py drop-in")
    parser.add_argument("pred_dir", nargs="?", default="results", type=Path)
    parser.add_argument("--out", default=Path(RESULT_FILE), type=Path, help="where to write result.txt")
    parser.add_argument("--compensated", action="store_true", help="an unextractable answer scores 0.25")
    parser.add_argument("--data", type=Path, help="data.json: also print lbeval's figures (missing = wrong)")
    args = parser.parse_args(argv)
    try:
        expected = read_expected(args.data) if args.data is not None else None
        results = evaluate_folder(args.pred_dir, compensated=args.compensated, expected=expected)
    except (PredictionFileError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = format_result(results)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    if expected is not None:
        print("\nlbeval (every data item counts; Dropped = missing from the file, counted wrong):")
        print(format_lbeval(results))
    return 0
