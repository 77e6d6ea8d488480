"""The benchmarks lbeval knows, as data: which package holds each, which prompt files under prompts/ it names, and
which dataset names are its. Adding a benchmark: its package in eval/benchmarks/, one entry here and one line in
each stage's mapping of benchmarks to their stage parts (prepare: `eval/prepare/build.PREPARE_PARTS`, analyze:
`eval/analyze/accuracy.SCORING`; docs/development.md, "Adding a benchmark"). The registry imports no stage, so
each stage keeps its own mapping, keyed by `Benchmark.name`, and looks a dataset's entry up with `stage_entry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from eval.benchmarks.longbench import spec as v1
from eval.benchmarks.longbench_v2 import prompting as v2_prompting
from eval.benchmarks.longbench_v2 import spec as v2

T = TypeVar("T")


@dataclass(frozen=True)
class Benchmark:
    name: str  # the package's folder under eval/benchmarks/
    title: str
    prompt_files: tuple[str, ...]  # the official templates it reads, relative to prompts/
    owns: Callable[[str], bool]  # is a dataset name this benchmark's
    context_end: Callable[
        [str], str
    ]  # dataset -> the template text after its context (the sibling prompt's cut)
    # (answer template, reasoning output) -> the answer call's prompt; None: no two-call (CoT) inputs
    insert_answer: Callable[[str, str], str] | None = None


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("longbench", "LongBench v1", v1.PROMPT_FILES, v1.is_v1, v1.context_end),
    Benchmark(
        "longbench_v2", "LongBench v2", v2.PROMPT_FILES, v2.is_v2, v2.context_end, v2_prompting.insert_cot
    ),
)


def benchmark_of(dataset: str) -> Benchmark:
    """The benchmark a dataset name belongs to; an unknown name is a ConfigError naming the known datasets."""
    for benchmark in BENCHMARKS:
        if benchmark.owns(dataset):
            return benchmark
    raise v1.unknown_dataset(dataset)


class NoStageEntry(LookupError):
    """A dataset's benchmark has no entry in a stage's mapping: an lbeval bug (the benchmark was registered but
    its stage part was not added), caught by each stage mapping's test (entry_problems)."""


def stage_entry(entries: Mapping[str, T], dataset: str, where: str) -> T:
    """The entry of a dataset's benchmark in a stage's mapping (benchmark name -> that benchmark's stage part);
    an unknown dataset is benchmark_of's ConfigError, a benchmark without an entry one NoStageEntry."""
    benchmark = benchmark_of(dataset)
    if benchmark.name not in entries:
        raise NoStageEntry(
            f"dataset {dataset!r} is {benchmark.title}'s (eval/benchmarks/{benchmark.name}/), which has no entry "
            f'in {where}; add one line there (docs/development.md, "Adding a benchmark")'
        )
    return entries[benchmark.name]


def entry_problems(entries: Mapping[str, object], where: str) -> list[str]:
    """What a stage's mapping lacks or has too many: a registered benchmark without an entry, an unregistered
    name with one (tests/eval/prepare/test_build.py and tests/eval/analyze/test_accuracy.py check theirs)."""
    names = [b.name for b in BENCHMARKS]
    missing = [f"{where}: no entry for benchmark {n!r}" for n in names if n not in entries]
    return missing + [f"{where}: entry {n!r} is no registered benchmark" for n in entries if n not in names]
