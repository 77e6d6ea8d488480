"""The benchmark protocol and registry: what a benchmark is to the stages, and which benchmarks are loaded.

A benchmark is one package under eval/benchmarks/ (`longbench/`, `longbench_v2/`): its dataset specs, prompting,
data sources, input rows and their extra fields, scoring adapter, report tables and its own `lbeval prepare`
options. No stage imports a benchmark package. Each stage declares what it asks of a benchmark as a typed `Slot`
(prepare's part: `prepare/benchmark_part.PREPARE_PART`; its command-line options, each a `CliOption`:
`prepare/benchmark_part.PREPARE_ARGS`; an input row's extra fields: `prepare/inputs.INPUT_EXTRAS`; scoring:
`analyze/accuracy.SCORING`; report tables: `report/benchmark_tables.REPORT_TABLES`) and finds a dataset's entry
with `stage_entry`; what `lbeval datasets` lists of a benchmark is its entry in `LISTING` (declared here: the
command layer sits above the packages). A package's `plugin.py` makes its `Benchmark`, one `Hook` per slot it
fills; the command layer registers them in the one `REGISTRY` (`eval/benchmarks/plugins.load_benchmarks`) before
it builds its parser, in a fixed order (the order prepare makes their parts in, and `lbeval datasets` lists them
in). This module imports no stage and no benchmark package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from eval.errors import ConfigError

T = TypeVar("T")


class Slot(Generic[T]):
    """What a stage asks of a benchmark, typed: a `Hook` fills it with a value of type T. `where` names the
    declaring module (in the error for a benchmark without an entry)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def __repr__(self) -> str:
        return f"Slot({self.where!r})"


@dataclass(frozen=True)
class Hook(Generic[T]):
    """A benchmark's entry in one stage's slot."""

    slot: Slot[T]
    value: T


@dataclass(frozen=True)
class Benchmark:
    name: str  # the package's folder under eval/benchmarks/
    title: str
    prompt_files: tuple[str, ...]  # the official templates it reads, relative to prompts/
    owns: Callable[[str], bool]  # is a dataset name this benchmark's
    datasets: Callable[[], list[str]]  # its dataset names (the unknown-dataset message lists them)
    context_end: Callable[
        [str], str
    ]  # dataset -> the template text after its context (the sibling prompt's cut)
    # (answer template, reasoning output) -> the answer call's prompt; None: no two-call (CoT) inputs
    insert_answer: Callable[[str, str], str] | None = None
    hooks: tuple[Hook[Any], ...] = ()

    def entry(self, slot: Slot[T]) -> T | None:
        """The benchmark's entry in a stage's slot; None without one."""
        found = [h.value for h in self.hooks if h.slot is slot]
        return cast(T, found[0]) if found else None


class NoStageEntry(LookupError):
    """A dataset's benchmark has no entry in a stage's slot, or no benchmark is loaded: an lbeval bug (the
    benchmark's plugin.py lacks a hook, or an entry point did not load the benchmarks)."""


@dataclass(frozen=True)
class CliOption:
    """One command-line option a benchmark adds to a command: `--<name>`, its help (argparse's %(default)s
    allowed), its default and its choices (None: any text). The parsed value is a string."""

    name: str  # the flag without its dashes ("v2-mode"); the parsed value's key (`dest`: "v2_mode")
    help: str
    default: str
    choices: tuple[str, ...] | None = None

    @property
    def flag(self) -> str:
        return f"--{self.name}"

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


@dataclass(frozen=True)
class ListedDataset:
    """One dataset as `lbeval datasets` lists it: a row of its table and an entry of its `--json`."""

    dataset: str
    metric: str
    max_tokens: int  # the official output limit (of the default mode's first call)
    mode: str  # the request mode, "chat" | "raw"
    language: str
    first_line_only: bool
    label: str = ""  # shown after the table row, e.g. "(LongBench v2)"
    # the benchmark's own keys of the dataset's `--json` entry, after the ones above
    json_extra: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Listing:
    """What `lbeval datasets` lists of one benchmark: its datasets, in order, and the table's lines under their
    rows (a note, its modes)."""

    datasets: tuple[ListedDataset, ...]
    notes: tuple[str, ...] = ()


# a benchmark's listing in `lbeval datasets` (every benchmark), made when the command runs
LISTING: Slot[Callable[[], Listing]] = Slot("eval/benchmark_registry.LISTING")


class BenchmarkRegistry:
    """Which benchmarks are loaded, in load order, and what the stages ask of them. The process has one
    (`REGISTRY`, filled by `eval/benchmarks/plugins.load_benchmarks` before any stage runs; the module's functions
    below are its methods); a test makes a fresh one and registers what it needs, touching no global state."""

    def __init__(self) -> None:
        self._loaded: dict[str, Benchmark] = {}

    def register(self, benchmark: Benchmark) -> Benchmark:
        """Load one benchmark (the same one again: no change); another benchmark under a loaded name is refused
        (ValueError, one line): an lbeval bug."""
        loaded = self._loaded.get(benchmark.name)
        if loaded is not None and loaded is not benchmark:
            raise ValueError(f"two benchmarks are named {benchmark.name!r}")
        self._loaded[benchmark.name] = benchmark
        return benchmark

    def benchmarks(self) -> tuple[Benchmark, ...]:
        """The loaded benchmarks, in load order."""
        if not self._loaded:
            raise NoStageEntry(
                "no benchmark is loaded: an entry point must call eval.benchmarks.plugins.load_benchmarks() first"
            )
        return tuple(self._loaded.values())

    def benchmark_of(self, dataset: str) -> Benchmark:
        """The benchmark a dataset name belongs to; an unknown name is a ConfigError naming the known datasets."""
        loaded = self.benchmarks()
        for benchmark in loaded:
            if benchmark.owns(dataset):
                return benchmark
        known = "; ".join(f"{b.title}: {', '.join(sorted(b.datasets()))}" for b in loaded)
        raise ConfigError(f"unknown dataset {dataset!r}; known datasets of {known}")

    def stage_entry(self, slot: Slot[T], dataset: str) -> T:
        """The entry of a dataset's benchmark in a stage's slot; an unknown dataset is benchmark_of's ConfigError,
        a benchmark without an entry one NoStageEntry."""
        benchmark = self.benchmark_of(dataset)
        value = benchmark.entry(slot)
        if value is None:
            raise NoStageEntry(
                f"dataset {dataset!r} is {benchmark.title}'s (eval/benchmarks/{benchmark.name}/), which has no "
                f"entry in {slot.where}; add a Hook for it to eval/benchmarks/{benchmark.name}/plugin.py"
            )
        return value

    def entries(self, slot: Slot[T]) -> dict[str, T]:
        """Every loaded benchmark's entry in a slot, by name, in load order (a benchmark without one left out)."""
        out: dict[str, T] = {}
        for benchmark in self.benchmarks():
            value = benchmark.entry(slot)
            if value is not None:
                out[benchmark.name] = value
        return out

    def entry_problems(self, slots: Mapping[str, Slot[Any]]) -> list[str]:
        """Which loaded benchmark lacks an entry in which slot (tests/eval/benchmarks/test_registry.py checks
        every stage's slot)."""
        return [
            f"{slot.where}: no entry for benchmark {b.name!r}"
            for slot in slots.values()
            for b in self.benchmarks()
            if b.entry(slot) is None
        ]


REGISTRY = BenchmarkRegistry()  # the process's registry, written only at load time, before any stage runs
register = REGISTRY.register
benchmarks = REGISTRY.benchmarks
benchmark_of = REGISTRY.benchmark_of
stage_entry = REGISTRY.stage_entry
entries = REGISTRY.entries
entry_problems = REGISTRY.entry_problems
