"""The result types of a run's accuracy: what each benchmark's scoring adapter (eval/benchmarks/<name>/accuracy.py)
returns and analyze/accuracy.py collects. Apart from that module so the adapters can build them without the
collection. A benchmark's own figures ride in the `extras` of ExampleScore and DatasetAccuracy: a type of its
package, which only its package reads (its report tables, eval/report/benchmark_tables.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

# the metrics whose datasets get the secondary ROUGE-L (Google rouge-score): English rouge datasets only; its
# tokenizer drops non-ASCII text, so on rouge_zh datasets it would always be 0.0
SECONDARY_ROUGE_METRICS = ("rouge",)


class ExampleExtras(Protocol):
    """A benchmark's own outcome of one example in one pass (a frozen dataclass of its package)."""


class AccuracyExtras(Protocol):
    """A benchmark's own figures of one dataset (a frozen dataclass of its package)."""

    def json_fields(self) -> dict[str, Any]:
        """The fields it adds to the dataset's entry in scores.json (each benchmark's keys: its scoring's
        `json_defaults`)."""
        ...


@dataclass(frozen=True)
class ExampleScore:
    """One example's scores in one pass, both 0..1."""

    official: float  # the dataset's official LongBench metric (v2: 1 right, 0 wrong or no answer)
    rouge_l: float | None  # secondary: rouge-score ROUGE-L F, rouge datasets only
    extras: ExampleExtras | None = (
        None  # the benchmark's own outcome (LongBench v2: the answer letter, dropped)
    )


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
    extras: AccuracyExtras | None = None  # the benchmark's own figures (LongBench v2: pass -> both figures)
