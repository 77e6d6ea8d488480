"""The benchmarks lbeval ships, loaded like plugins: the command layer (eval/cli.py, before it builds its parser,
since a benchmark brings its own command-line options; tests/conftest.py and bench/ for their direct calls) calls
`load_benchmarks()` before any stage runs. The order is the registry's order (the order prepare makes the
benchmarks' parts and takes the header's source in). Adding a benchmark: its package with a plugin.py, and one
line here (docs/development.md, "Adding a benchmark")."""

from __future__ import annotations

from eval.benchmark_registry import REGISTRY, Benchmark, BenchmarkRegistry
from eval.benchmarks.longbench import plugin as longbench
from eval.benchmarks.longbench_v2 import plugin as longbench_v2

SHIPPED: tuple[Benchmark, ...] = (longbench.BENCHMARK, longbench_v2.BENCHMARK)


def load_benchmarks(registry: BenchmarkRegistry = REGISTRY) -> BenchmarkRegistry:
    """Register the shipped benchmarks in `registry` (the process's by default; again: no change)."""
    for benchmark in SHIPPED:
        registry.register(benchmark)
    return registry
