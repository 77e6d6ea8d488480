"""Accuracy of one run: the official score per dataset and generation pass, per example and overall.

Each dataset's benchmark (eval/benchmarks/registry.py) scores it: SCORING maps the benchmark's name to its scoring
adapter (eval/benchmarks/<name>/accuracy.py: `example_score` for an input in a pass, `dataset_accuracy` for a
dataset's inputs); this module hands each its inputs and the run's final records and collects the results
(accuracy_types.py). LongBench v1 scores an output with its dataset's metric; LongBench v2's PassScore.score is
lbeval's accuracy over every input (an input without a usable outcome counts as wrong), and DatasetAccuracy.v2
holds, per pass, that and the official result.py figures (dropped items out of the denominator) by difficulty
and length, compensated too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from eval.analyze.accuracy_types import DatasetAccuracy, ExampleScore
from eval.analyze.memo import ScoreMemo
from eval.benchmarks.longbench import accuracy as v1_accuracy
from eval.benchmarks.longbench_v2 import accuracy as v2_accuracy
from eval.benchmarks.registry import stage_entry
from eval.prepare.inputs import InputRow
from eval.records.final import ExampleKey as Key
from eval.records.final import Selection


@dataclass(frozen=True)
class Scoring:
    """A benchmark's scoring adapter, the two functions of its accuracy.py analyze calls."""

    # (input, final records, pass, memo) -> the input's scores in the pass; None: no ok sample to score
    example: Callable[[InputRow, Selection, str, ScoreMemo | None], ExampleScore | None]
    # (dataset, its inputs, pass -> key -> scores) -> the dataset's accuracy
    dataset: Callable[[str, Sequence[InputRow], Mapping[str, Mapping[Key, ExampleScore]]], DatasetAccuracy]


# each benchmark's scoring adapter, by the registry's name: one line per benchmark
SCORING: Mapping[str, Scoring] = MappingProxyType(
    {
        "longbench": Scoring(v1_accuracy.example_score, v1_accuracy.dataset_accuracy),
        "longbench_v2": Scoring(v2_accuracy.example_score, v2_accuracy.dataset_accuracy),
    }
)
WHERE = "eval/analyze/accuracy.SCORING"


def scorings(datasets: Sequence[str]) -> dict[str, Scoring]:
    """Each dataset's benchmark's adapter, in first-seen order (an unknown name or a benchmark without an entry
    is one error, for the first such dataset)."""
    return {ds: stage_entry(SCORING, ds, WHERE) for ds in dict.fromkeys(datasets)}


def example_scores(
    rows: Sequence[InputRow], sel: Selection, pass_name: str, memo: ScoreMemo | None = None
) -> dict[Key, ExampleScore]:
    """The scores of each example with an ok sample in the pass; `memo`: kept between scorings (memo.py)."""
    by_ds = scorings([row.dataset for row in rows])
    out: dict[Key, ExampleScore] = {}
    for row in rows:
        score = by_ds[row.dataset].example(row, sel, pass_name, memo)
        if score is not None:
            out[row.key] = score
    return out


def accuracy(
    rows: Sequence[InputRow], per_pass: Mapping[str, Mapping[Key, ExampleScore]]
) -> list[DatasetAccuracy]:
    """Each dataset's accuracy, in the order its first input comes."""
    by_ds: dict[str, list[InputRow]] = {}
    for row in rows:
        by_ds.setdefault(row.dataset, []).append(row)
    adapters = scorings(list(by_ds))
    return [adapters[ds].dataset(ds, ds_rows, per_pass) for ds, ds_rows in by_ds.items()]
