"""The benchmarks lbeval ships, loaded like plugins: the command layer (eval/cli.py; tests/conftest.py and bench/
for their direct calls) calls `load_benchmarks()` before any stage runs. The order is the registry's order (the
order prepare makes the benchmarks' parts and takes the header's source in). Adding a benchmark: its package with
a plugin.py, and one line here (docs/development.md, "Adding a benchmark")."""

from __future__ import annotations

from eval.benchmark_registry import Benchmark, register
from eval.benchmarks.longbench import plugin as longbench
from eval.benchmarks.longbench_v2 import plugin as longbench_v2

SHIPPED: tuple[Benchmark, ...] = (longbench.BENCHMARK, longbench_v2.BENCHMARK)


def load_benchmarks() -> None:
    """Register the shipped benchmarks (again: no change)."""
    for benchmark in SHIPPED:
        register(benchmark)
