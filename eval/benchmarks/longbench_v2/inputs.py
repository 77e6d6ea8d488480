"""LongBench v2's check of its input rows when an inputs manifest is read (eval/prepare/inputs.ROW_CHECK): its
fields all there (and consistent) on a longbench_v2 row, in a file of the schema that added them."""

from __future__ import annotations

from pathlib import Path

from eval.benchmarks.longbench_v2.prompting import COT_PLACEHOLDER
from eval.benchmarks.longbench_v2.spec import V2_CHAT_MODE, V2_DATASET, V2_MODES
from eval.errors import DataError
from eval.prepare.inputs import V2_FIELDS_SINCE, InputRow, field_problem
from scorers.longbench_v2.score import LETTERS


def check_row(row: InputRow, path: Path, lineno: int, schema: int) -> None:
    """A longbench_v2 row's fields: a DataError naming file, line and field for the first problem."""
    if schema < V2_FIELDS_SINCE:
        raise DataError(path, lineno, "dataset", f"{V2_DATASET} rows need inputs schema {V2_FIELDS_SINCE}")
    for name in ("v2_mode", "difficulty", "length_class"):
        if getattr(row, name) is None:
            raise DataError(path, lineno, name, f"missing on a {V2_DATASET} row")
    problem = field_problem(row.v2_mode, str, {"choices": tuple(V2_MODES)})
    if problem is not None:
        raise DataError(path, lineno, "v2_mode", problem)
    if len(row.answers) != 1 or row.answers[0] not in LETTERS:
        raise DataError(
            path, lineno, "answers", f"must be one answer letter ({', '.join(LETTERS)}) on a v2 row"
        )
    if row.all_classes is not None:
        raise DataError(path, lineno, "all_classes", "must be null on a v2 row")
    if row.mode != V2_CHAT_MODE:
        raise DataError(path, lineno, "mode", f"must be {V2_CHAT_MODE!r} on a v2 row")
    check_answer_call(row, path, lineno)


def check_answer_call(row: InputRow, path: Path, lineno: int) -> None:
    """The answer call's template and limit: on cot rows only, the template with a place for the reasoning."""
    cot = V2_MODES[str(row.v2_mode)].answer_template is not None
    for name in ("answer_template", "answer_max_tokens"):
        if (getattr(row, name) is not None) != cot:
            needed = "needed on a cot row" if cot else f"only on cot rows (this row is {row.v2_mode})"
            raise DataError(path, lineno, name, needed)
    if cot and COT_PLACEHOLDER not in str(row.answer_template):
        raise DataError(
            path, lineno, "answer_template", f"has no {COT_PLACEHOLDER} for the CoT call's output"
        )
