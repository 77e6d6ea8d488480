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

from dataclasses import dataclass, field

from eval.benchmarks.longbench.accuracy import OutputScores, score_output
from eval.prepare.inputs import InputRow
from eval.records.types import RequestRecord
from scorers import determinism


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
    outputs: dict[tuple[int, int], tuple[InputRow, RequestRecord, OutputScores]] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def pair(self, a: RequestRecord, b: RequestRecord) -> determinism.PairResult:
        kept = self.pairs.get((id(a), id(b)))
        if kept is not None and kept[0] is a and kept[1] is b:
            self.hits += 1
            return kept[2]
        self.misses += 1
        result = compare_records(a, b)
        self.pairs[(id(a), id(b))] = (a, b, result)
        return result

    def output(self, row: InputRow, rec: RequestRecord, text: str) -> OutputScores:
        kept = self.outputs.get((id(row), id(rec)))
        if kept is not None and kept[0] is row and kept[1] is rec:
            self.hits += 1
            return kept[2]
        self.misses += 1
        result = score_output(row, text)
        self.outputs[(id(row), id(rec))] = (row, rec, result)
        return result


def pair_result(memo: ScoreMemo | None, a: RequestRecord, b: RequestRecord) -> determinism.PairResult:
    """The pair metrics of two records, kept in `memo` when given."""
    return compare_records(a, b) if memo is None else memo.pair(a, b)


def output_scores(memo: ScoreMemo | None, row: InputRow, rec: RequestRecord, text: str) -> OutputScores:
    """The official metric (and ROUGE-L) of a record's output, kept in `memo` when given."""
    return score_output(row, text) if memo is None else memo.output(row, rec, text)
