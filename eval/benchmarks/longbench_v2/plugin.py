"""LongBench v2 as the stages see it: its `Benchmark`, one hook per stage slot it fills (prepare's part and its
command line, its `lbeval datasets` listing, an input row's extra fields, scoring, its report tables), registered
by the command layer (eval/benchmarks/plugins.py)."""

from __future__ import annotations

from eval.analyze.accuracy import SCORING, Scoring
from eval.benchmark_registry import LISTING, Benchmark, Hook
from eval.benchmarks.longbench_v2 import accuracy, report, spec
from eval.benchmarks.longbench_v2.build import LongBenchV2Part
from eval.benchmarks.longbench_v2.figures import JSON_KEY
from eval.benchmarks.longbench_v2.inputs import CODEC, check_row
from eval.benchmarks.longbench_v2.prompting import insert_cot
from eval.benchmarks.longbench_v2.spec import PROMPT_FILES, V2_DATASET, context_end, is_v2
from eval.prepare.benchmark_part import PREPARE_ARGS, PREPARE_PART
from eval.prepare.inputs import INPUT_EXTRAS, ROW_CHECK
from eval.report.benchmark_tables import REPORT_TABLES, BenchmarkTables


def datasets() -> list[str]:
    return [V2_DATASET]


BENCHMARK = Benchmark(
    "longbench_v2",
    "LongBench v2",
    PROMPT_FILES,
    is_v2,
    datasets,
    context_end,
    insert_cot,
    hooks=(
        Hook(PREPARE_PART, LongBenchV2Part),
        Hook(PREPARE_ARGS, spec.PREPARE_ARGS),
        Hook(LISTING, spec.listing),
        Hook(INPUT_EXTRAS, CODEC),
        Hook(ROW_CHECK, check_row),
        Hook(SCORING, Scoring(accuracy.example_score, accuracy.dataset_accuracy, {JSON_KEY: {}})),
        Hook(
            REPORT_TABLES, BenchmarkTables(report.run_v2_table, report.v2_compare_table, report.accuracy_note)
        ),
    ),
)
