"""Accuracy of one run: the official score per dataset and generation pass, per example and overall.

Each dataset's benchmark (eval/benchmark_registry.py) scores it: its entry in the SCORING slot is its scoring
adapter (eval/benchmarks/<name>/accuracy.py: `example_score` for an input in a pass, `dataset_accuracy` for a
dataset's inputs); this module hands each its inputs and the run's final records and collects the results
(accuracy_types.py). A benchmark's own figures (LongBench v2's official result.py figures by difficulty and
length) ride in the results' typed extras, which only the benchmark's package reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from eval.analyze.accuracy_types import DatasetAccuracy, ExampleScore
from eval.analyze.memo import ScoreMemo
from eval.benchmark_registry import Slot, entries, stage_entry
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
    # the keys its DatasetAccuracy.extras adds to a scores.json accuracy entry, with their value on a dataset of
    # another benchmark (every entry carries every loaded benchmark's keys)
    json_defaults: Mapping[str, object] = field(default_factory=dict)


SCORING: Slot[Scoring] = Slot("eval/analyze/accuracy.SCORING")  # each benchmark's adapter (its plugin.py)


def scorings(datasets: Sequence[str]) -> dict[str, Scoring]:
    """Each dataset's benchmark's adapter, in first-seen order (an unknown name or a benchmark without an entry
    is one error, for the first such dataset)."""
    return {ds: stage_entry(SCORING, ds) for ds in dict.fromkeys(datasets)}


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


def accuracy_json_defaults() -> dict[str, object]:
    """The keys every scores.json accuracy entry carries beside its own (each loaded benchmark's)."""
    return {k: v for scoring in entries(SCORING).values() for k, v in scoring.json_defaults.items()}
