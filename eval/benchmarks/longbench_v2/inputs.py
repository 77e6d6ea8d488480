"""LongBench v2's own fields of an input row and their check when an inputs manifest is read.

`V2InputFields` is the row's extras (eval/prepare/inputs.InputRow.extras): the mode it was built in, the item's
difficulty and length class, and the templated prompt's tokens before truncation. They are written at the top
level of the row's line (as schema 3 wrote them) and read back by `read_fields` (eval/prepare/inputs.INPUT_EXTRAS);
`check_row` (ROW_CHECK) checks the whole row: the schema, one answer letter, chat mode, and the answer call's
template and limit on cot rows only."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eval.benchmarks.longbench_v2.prompting import COT_PLACEHOLDER
from eval.benchmarks.longbench_v2.spec import V2_CHAT_MODE, V2_DATASET, V2_MODES
from eval.errors import DataError
from eval.prepare.inputs import V2_FIELDS_SINCE, ExtrasCodec, InputRow, field_problem
from scorers.longbench_v2.score import DIFFICULTIES, LENGTHS, LETTERS


@dataclass(frozen=True)
class V2InputFields:
    v2_mode: str  # 0shot | cot | nocontext (spec.V2_MODES)
    difficulty: str  # easy | hard
    length_class: str  # short | medium | long
    original_tokens: int | None = (
        None  # tokens of the templated prompt before truncation; None without a tokenizer
    )

    def line_fields(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


REQUIRED = ("v2_mode", "difficulty", "length_class")
# each field's type and constraints on the line (eval/prepare/inputs.field_problem)
RULES: dict[str, tuple[Any, dict[str, Any]]] = {
    "v2_mode": (str, {"choices": tuple(V2_MODES)}),
    "difficulty": (str, {"choices": DIFFICULTIES}),
    "length_class": (str, {"choices": LENGTHS}),
    "original_tokens": (int | None, {"min": 0}),
}
CODEC_NAMES = tuple(RULES)


def read_fields(given: dict[str, Any], path: Path, lineno: int) -> V2InputFields:
    """A v2 row's own fields from its line; a DataError naming the field for a missing or bad one."""
    for name in REQUIRED:
        if given.get(name) is None:
            raise DataError(path, lineno, name, f"missing on a {V2_DATASET} row")
    for name, (tp, rules) in RULES.items():
        problem = field_problem(given.get(name), tp, rules)
        if problem is not None:
            raise DataError(path, lineno, name, problem)
    return V2InputFields(**given)


CODEC = ExtrasCodec(CODEC_NAMES, read_fields)


def v2_fields(row: InputRow) -> V2InputFields:
    """A longbench_v2 row's own fields (a row of another benchmark, or one built without them, is a bug)."""
    if not isinstance(row.extras, V2InputFields):
        raise ValueError(f"{row.dataset}/{row.id} has no LongBench v2 fields")
    return row.extras


def check_row(row: InputRow, path: Path, lineno: int, schema: int) -> None:
    """A longbench_v2 row as a whole: a DataError naming file, line and field for the first problem."""
    if schema < V2_FIELDS_SINCE:
        raise DataError(path, lineno, "dataset", f"{V2_DATASET} rows need inputs schema {V2_FIELDS_SINCE}")
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
    mode = v2_fields(row).v2_mode
    cot = V2_MODES[mode].answer_template is not None
    for name in ("answer_template", "answer_max_tokens"):
        if (getattr(row, name) is not None) != cot:
            needed = "needed on a cot row" if cot else f"only on cot rows (this row is {mode})"
            raise DataError(path, lineno, name, needed)
    if cot and COT_PLACEHOLDER not in str(row.answer_template):
        raise DataError(
            path, lineno, "answer_template", f"has no {COT_PLACEHOLDER} for the CoT call's output"
        )
