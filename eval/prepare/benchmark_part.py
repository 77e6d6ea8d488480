"""What prepare asks of a benchmark and what the benchmark hands back: the contract between `prepare/build.py` and
each benchmark's `build.py` (eval/benchmarks/<name>/build.py, prepare's part of the benchmark).

prepare makes one part per loaded benchmark (its entry in `PREPARE_PART`, a `PartFactory`: the benchmark's plugin.py), with
the benchmark's datasets in --datasets order (possibly none), after every dataset name is known and before any
I/O; a part checks its options when made. Then prepare calls `open()` on every part (the I/O its datasets
share), `dataset(name)` once per dataset in --datasets order, and last `header()`. prepare itself warns when a
dataset has fewer rows than --n and puts the header together (build.py).

A benchmark's own options come from the command line: its entry in `PREPARE_ARGS` names them, `lbeval prepare`
adds every loaded benchmark's to its parser, and the benchmark makes its options object from their values; prepare
carries that object to the benchmark's part unread (`PrepareJob.options`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from eval.benchmark_registry import CliOption, Slot
from eval.prepare.data_source import DataSource, Downloader
from eval.prepare.inputs import InputRow
from eval.prepare.tokenizers import Tokenizer


@dataclass(frozen=True)
class PrepareJob:
    """The options every benchmark's part reads, and the stage's input budget."""

    source: DataSource
    n: int | None
    seed: int
    tokenizer: Tokenizer | None  # None: --no-truncate
    max_tokens: Mapping[str, int]  # per-dataset output limit overrides (--max-tokens)
    # benchmark name -> its own options (a value of its package's type, made by the command layer from the
    # benchmark's flags): opaque to prepare, read and checked by that benchmark's part; absent: its defaults
    options: Mapping[str, object]
    budget: Callable[[str, int], int]  # (request mode "chat" | "raw", output limit) -> the input budget
    downloads: Mapping[str, Downloader]  # benchmark name -> its Hub download (absent: the benchmark's own)


@dataclass(frozen=True)
class DatasetPart:
    """One dataset, prepared: its input rows and what the inputs header records of it."""

    rows: list[InputRow]
    ids: list[str]  # the selected ids, in selection order
    available: int  # rows the data has
    max_tokens: int  # the output limit of its (first) call
    max_input_tokens: int | None  # the input budget of that call; None without a tokenizer
    file: dict[str, Any]  # the header's source["files"][dataset]: which file, its SHA-256, rows


@dataclass(frozen=True)
class HeaderPart:
    """What a benchmark adds to the inputs header once its datasets are prepared."""

    source: dict[str, Any] | None  # the provenance of the data it read (None: it read none)
    templates: dict[str, Any]  # merged into the header's `templates`
    extra: dict[str, Any]  # merged into the header's `extra`


class BenchmarkPart(Protocol):
    def open(self) -> None:
        """The I/O the benchmark's datasets share (after every part's checks, before the first dataset)."""

    def dataset(self, dataset: str) -> DatasetPart:
        """Read, select and build one of the benchmark's datasets."""

    def header(self) -> HeaderPart:
        """What the header records of the benchmark (after its datasets)."""


PartFactory = Callable[[PrepareJob, Sequence[str]], BenchmarkPart]
PREPARE_PART: Slot[PartFactory] = Slot("eval/prepare/benchmark_part.PREPARE_PART")


@dataclass(frozen=True)
class PrepareArgs:
    """What a benchmark adds to `lbeval prepare`'s command line: how the --datasets help names its datasets, its
    own options (the command adds every loaded benchmark's, after --datasets) and how their parsed values, by
    `CliOption.dest`, become its options object (PrepareJob.options, under its name; None: it has no options)."""

    datasets: str  # how the --datasets help names them, e.g. "LongBench v1 names"
    options: tuple[CliOption, ...] = ()
    make: Callable[[Mapping[str, str]], object] | None = None


PREPARE_ARGS: Slot[PrepareArgs] = Slot("eval/prepare/benchmark_part.PREPARE_ARGS")
