"""`lbeval prepare`: rows -> seeded subset -> official prompt -> middle truncation -> inputs manifest.

Each dataset's benchmark (eval/benchmark_registry.py) builds its rows: its entry in PREPARE_PART makes its part
(eval/benchmarks/<name>/build.py, the contract in benchmark_part.py); prepare checks the names, measures
the input budget (Budgeter), warns when --n asks more rows than a dataset has and writes the manifest."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from eval.benchmark_registry import benchmark_of, benchmarks, entries, stage_entry
from eval.errors import ConfigError
from eval.prepare.benchmark_part import PREPARE_PART, BenchmarkPart, DatasetPart, HeaderPart, PrepareJob
from eval.prepare.data_source import DataSource, Downloader
from eval.prepare.inputs import (
    InputRow,
    InputsHeader,
    InputsSource,
    InputsTemplates,
    InputsTokenizer,
    write_inputs,
)
from eval.prepare.tokenizers import Tokenizer, chat_overhead, input_budget
from eval.provenance import git_state, lbeval_version
from eval.terminal import echo_err


@dataclass
class PrepareConfig:
    source: DataSource
    datasets: list[str]
    n: int | None
    seed: int
    out: Path
    tokenizer: Tokenizer | None = None  # None: --no-truncate
    max_tokens: dict[str, int] = field(default_factory=dict)  # per-dataset output limit overrides
    max_input_tokens: int | None = None  # overrides the computed budget
    max_model_len: int | None = None  # overrides the tokenizer's / server's
    # benchmark name -> its own options, passed to its part as they are (PrepareJob.options); absent: its defaults
    benchmark_options: Mapping[str, object] = field(default_factory=dict)


def parse_max_tokens(text: str | None) -> dict[str, int]:
    """`qasper=512,gov_report=2048` -> {"qasper": 512, "gov_report": 2048}."""
    result: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, sep, value = part.partition("=")
        if not sep or not value.strip().isdigit() or int(value) <= 0:
            raise ConfigError(f"--max-tokens: expected DATASET=POSITIVE_INT, got {part!r}")
        benchmark_of(name.strip())  # validates the name
        result[name.strip()] = int(value)
    return result


class Budgeter:
    """Input budgets per (mode, output limit), measuring the chat overhead once."""

    def __init__(self, cfg: PrepareConfig) -> None:
        self.cfg = cfg
        self._overhead: int | None = None

    def max_model_len(self) -> int:
        tok = self.cfg.tokenizer
        value = self.cfg.max_model_len or (tok.max_model_len() if tok else None)
        if value is None:
            raise ConfigError(
                "cannot tell the model's max_model_len: pass --max-model-len or --max-input-tokens"
            )
        return value

    def budget(self, mode: str, max_tokens: int) -> int:
        if self.cfg.max_input_tokens is not None:
            return self.cfg.max_input_tokens
        assert self.cfg.tokenizer is not None
        overhead = 0
        if mode == "chat":
            if self._overhead is None:
                self._overhead = chat_overhead(self.cfg.tokenizer)
            overhead = self._overhead
        return input_budget(self.max_model_len(), max_tokens, overhead)


def warn_stderr(message: str) -> None:
    echo_err(f"lbeval prepare: warning: {message}")


def short_of_n(dataset: str, available: int, n: int | None) -> str | None:
    """The warning when --n asks more rows than the dataset has (all of them are taken)."""
    if n is None or available >= n:
        return None
    return f"{dataset}: --n {n} asked but the data has only {available} rows; taking all {available}"


def benchmark_parts(job: PrepareJob, datasets: Sequence[str]) -> dict[str, BenchmarkPart]:
    """One part per loaded benchmark with an entry, in load order, each made with its datasets (in --datasets
    order; none: it still checks its options and adds its header fields)."""
    owner = {ds: benchmark_of(ds).name for ds in datasets}  # every name known before any part is made
    for ds in datasets:
        stage_entry(PREPARE_PART, ds)
    return {
        name: factory(job, [ds for ds in datasets if owner[ds] == name])
        for name, factory in entries(PREPARE_PART).items()
    }


def prepare(
    cfg: PrepareConfig,
    downloads: Mapping[str, Downloader] | None = None,
    warn: Callable[[str], None] = warn_stderr,
) -> tuple[InputsHeader, list[InputRow]]:
    """`downloads`: benchmark name -> its Hub download (absent: the benchmark's own)."""
    if not cfg.datasets:
        raise ConfigError("--datasets is empty")
    twice = next((ds for ds in cfg.datasets if cfg.datasets.count(ds) > 1), None)
    if twice is not None:
        raise ConfigError(f"--datasets: {twice} is listed twice")
    foreign = sorted(set(cfg.benchmark_options) - {b.name for b in benchmarks()})
    if foreign:
        raise ValueError(f"prepare options for {foreign[0]!r}, which is no loaded benchmark")
    budgeter = Budgeter(cfg)
    job = PrepareJob(
        cfg.source, cfg.n, cfg.seed, cfg.tokenizer, cfg.max_tokens,
        MappingProxyType(dict(cfg.benchmark_options)), budgeter.budget, MappingProxyType(dict(downloads or {})),
    )  # fmt: skip
    parts = benchmark_parts(job, cfg.datasets)
    for part in parts.values():
        part.open()
    done: dict[str, DatasetPart] = {}
    for ds in cfg.datasets:
        done[ds] = parts[benchmark_of(ds).name].dataset(ds)
        if (short := short_of_n(ds, done[ds].available, cfg.n)) is not None:
            warn(short)
    header = inputs_header(cfg, done, [part.header() for part in parts.values()])
    rows_out = [row for ds in cfg.datasets for row in done[ds].rows]
    write_inputs(cfg.out, header, rows_out)
    return header, rows_out


def inputs_header(
    cfg: PrepareConfig, done: Mapping[str, DatasetPart], parts: Sequence[HeaderPart]
) -> InputsHeader:
    """The header: the source of the first benchmark (registry order) that read data, with every dataset's file;
    the benchmarks' templates and extra fields merged; the per-dataset figures in --datasets order."""
    provenance = next(p.source for p in parts if p.source is not None)
    budgets = {ds: d.max_input_tokens for ds, d in done.items() if d.max_input_tokens is not None}
    commit, dirty = git_state()
    return InputsHeader(
        source=InputsSource.from_dict({**provenance, "files": {ds: d.file for ds, d in done.items()}}),
        seed=cfg.seed,
        n=cfg.n,
        datasets=list(cfg.datasets),
        selected_ids={ds: d.ids for ds, d in done.items()},
        templates=InputsTemplates.from_dict({k: v for p in parts for k, v in p.templates.items()}),
        tokenizer=InputsTokenizer.from_dict(cfg.tokenizer.describe() if cfg.tokenizer else {"kind": "none"}),
        max_input_tokens=budgets or None,
        max_tokens={ds: d.max_tokens for ds, d in done.items()},
        lbeval_version=lbeval_version(),
        git_commit=commit,
        git_dirty=dirty,
        n_taken={ds: len(d.ids) for ds, d in done.items()},
        n_available={ds: d.available for ds, d in done.items()},
        extra={k: v for p in parts for k, v in p.extra.items()},
    )
