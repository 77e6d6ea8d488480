"""The benchmarks lbeval knows, as data: which package holds each, which prompt files under prompts/ it names, and
which dataset names are its. Adding a benchmark: its package in eval/benchmarks/ and one entry here
(docs/development.md, "Adding a benchmark")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eval.benchmarks.longbench import spec as v1
from eval.benchmarks.longbench_v2 import prompting as v2_prompting
from eval.benchmarks.longbench_v2 import spec as v2


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
