"""Per-record results kept between scorings of a growing run (the stop check of `lbeval ab --stop-when-settled`,
eval/gate/settle.IncrementalCheck, scores the same records again at every look).

A `ScoreMemo` holds, for the records it has seen, what scoring computes from one record or one pair of records
and nothing else: an output's official metric and ROUGE-L (accuracy per input) and the pair metrics of two
outputs (determinism.compare_pair: agreement per pair, within a run, across the two runs and in the attribution
rows). Each result is kept under the identity of the record objects it was computed from, with the records
themselves (so an identity is never reused while its entry lives): a record that is superseded later (a retry)
is simply not asked again, and a new final record is scored as new. The aggregates (counts, scores per
dataset, intervals) are rebuilt from these kept parts by the same code as without a memo, so a scoring with a
memo equals one without (tests/eval/analyze/test_memo.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from eval.analyze.accuracy_types import ExampleScore
from eval.prepare.inputs import InputRow
from eval.records.types import RequestRecord
from scorers import determinism

T = TypeVar("T")


def as_generation(rec: RequestRecord) -> determinism.Generation:
    topk = rec.topk.as_dicts() if rec.topk is not None else None
    return determinism.Generation(rec.output_token_ids or [], rec.output_text or "", topk)


def compare_records(a: RequestRecord, b: RequestRecord) -> determinism.PairResult:
    return determinism.compare_pair(as_generation(a), as_generation(b))


@dataclass
class ScoreMemo:
    """The per-record results of one growing pair of runs (module docstring); `hits`/`misses` count lookups."""

    pairs: dict[tuple[int, int], tuple[RequestRecord, RequestRecord, determinism.PairResult]] = field(
        default_factory=dict
    )
    outputs: dict[tuple[int, int], tuple[InputRow, RequestRecord, ExampleScore]] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def _kept(
        self, table: dict[tuple[int, int], tuple[Any, Any, T]], x: Any, y: Any, compute: Callable[[], T]
    ) -> T:
        """The result kept for the objects x and y (by identity, checked: an id may be reused), else computed."""
        kept = table.get((id(x), id(y)))
        if kept is not None and kept[0] is x and kept[1] is y:
            self.hits += 1
            return kept[2]
        self.misses += 1
        result = compute()
        table[(id(x), id(y))] = (x, y, result)
        return result

    def pair(self, a: RequestRecord, b: RequestRecord) -> determinism.PairResult:
        return self._kept(self.pairs, a, b, lambda: compare_records(a, b))

    def output(self, row: InputRow, rec: RequestRecord, compute: Callable[[], ExampleScore]) -> ExampleScore:
        """The scores of a record's output for its input: kept, else `compute()` (the benchmark's scoring)."""
        return self._kept(self.outputs, row, rec, compute)


def pair_result(memo: ScoreMemo | None, a: RequestRecord, b: RequestRecord) -> determinism.PairResult:
    """The pair metrics of two records, kept in `memo` when given."""
    return compare_records(a, b) if memo is None else memo.pair(a, b)
