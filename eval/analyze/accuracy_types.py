"""The result types of a run's accuracy: what each benchmark's scoring adapter (eval/benchmarks/<name>/accuracy.py)
returns and analyze/accuracy.py collects. Apart from that module so the adapters can build them: analyze/accuracy.py
imports the adapters."""

from __future__ import annotations

from dataclasses import dataclass, field

from eval.benchmarks.longbench_v2.figures import V2PassAccuracy
from scorers.longbench_v2 import ItemResult


@dataclass(frozen=True)
class ExampleScore:
    """One example's scores in one pass, both 0..1."""

    official: float  # the dataset's official LongBench metric (v2: 1 right, 0 wrong or no answer)
    rouge_l: float | None  # secondary: rouge-score ROUGE-L F, rouge datasets only
    v2_item: ItemResult | None = None  # LongBench v2: the outcome (answer letter, dropped by pred.py's rule)


@dataclass(frozen=True)
class PassScore:
    score: float | None  # official LongBench dataset score (0-100, 2 decimals) over scored examples
    n_scored: int
    n_total: int  # every input of the dataset, including errored, invalid and missing samples
    rouge_l: float | None = None  # secondary: rouge-score ROUGE-L F (0-100), rouge datasets only


@dataclass(frozen=True)
class DatasetAccuracy:
    dataset: str
    metric: str
    passes: dict[str, PassScore]
    v2: dict[str, V2PassAccuracy] = field(default_factory=dict)  # LongBench v2: pass -> both figures
