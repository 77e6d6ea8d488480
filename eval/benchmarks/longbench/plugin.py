"""LongBench v1 as the stages see it: its `Benchmark`, one hook per stage slot it fills (prepare's part and
command line, scoring, its `lbeval datasets` listing), registered by the command layer
(eval/benchmarks/plugins.py)."""

from __future__ import annotations

from eval.analyze.accuracy import SCORING, Scoring
from eval.benchmark_registry import LISTING, Benchmark, Hook
from eval.benchmarks.longbench import accuracy
from eval.benchmarks.longbench.build import LongBenchPart
from eval.benchmarks.longbench.spec import PROMPT_FILES, context_end, is_v1, listing, load_specs
from eval.prepare.benchmark_part import PREPARE_ARGS, PREPARE_PART, PrepareArgs


def datasets() -> list[str]:
    return list(load_specs())


BENCHMARK = Benchmark(
    "longbench",
    "LongBench v1",
    PROMPT_FILES,
    is_v1,
    datasets,
    context_end,
    hooks=(
        Hook(PREPARE_PART, LongBenchPart),
        Hook(PREPARE_ARGS, PrepareArgs("LongBench v1 names (`<name>_e` for LongBench-E)")),
        Hook(SCORING, Scoring(accuracy.example_score, accuracy.dataset_accuracy)),
        Hook(LISTING, listing),
    ),
)
