"""`lbeval prepare`: rows -> seeded subset -> official prompt -> middle truncation -> inputs manifest."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from eval.benchmarks.longbench.build import build_row, output_limit, template_provenance
from eval.benchmarks.longbench.sources import hub_download, open_source
from eval.benchmarks.longbench.spec import get_spec
from eval.benchmarks.longbench_v2.build import prepare_v2
from eval.benchmarks.longbench_v2.sources import V2Downloader, hub_download_v2
from eval.benchmarks.longbench_v2.spec import DEFAULT_V2_MODE, V2_DATASET, get_v2_mode, is_v2
from eval.benchmarks.registry import benchmark_of
from eval.errors import ConfigError
from eval.prepare.data_source import DataSource, Downloader
from eval.prepare.inputs import InputRow, InputsHeader, write_inputs
from eval.prepare.select import select_ids
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
    v2_mode: str = DEFAULT_V2_MODE  # longbench_v2: 0shot | cot | nocontext (benchmarks/longbench_v2/spec.py)


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


def prepare(
    cfg: PrepareConfig,
    download: Downloader = hub_download,
    warn: Callable[[str], None] = warn_stderr,
    download_v2: V2Downloader = hub_download_v2,
) -> tuple[InputsHeader, list[InputRow]]:
    if not cfg.datasets:
        raise ConfigError("--datasets is empty")
    twice = next((ds for ds in cfg.datasets if cfg.datasets.count(ds) > 1), None)
    if twice is not None:
        raise ConfigError(f"--datasets: {twice} is listed twice")
    specs = {ds: get_spec(ds) for ds in cfg.datasets if not is_v2(ds)}  # validate every name before any I/O
    v2_mode = get_v2_mode(cfg.v2_mode)
    files, source = open_source(cfg.source, download) if specs else (None, {})
    source["files"] = {}
    extra: dict[str, Any] = {}
    budgeter = Budgeter(cfg)
    rows_out: list[InputRow] = []
    selected: dict[str, list[str]] = {}
    available: dict[str, int] = {}
    limits: dict[str, int] = {}
    budgets: dict[str, int] = {}
    for ds in cfg.datasets:
        if is_v2(ds):  # LongBench v2: eval/benchmarks/longbench_v2/build.py
            limits[ds] = cfg.max_tokens.get(ds, v2_mode.max_tokens)
            v2 = prepare_v2(
                cfg.source, v2_mode, n=cfg.n, seed=cfg.seed, max_tokens=limits[ds], tokenizer=cfg.tokenizer,
                budget=lambda limit: budgeter.budget("chat", limit), download=download_v2,
            )  # fmt: skip
            source = source if specs else {**v2.source, "files": {}}
            source["files"][ds], extra[V2_DATASET] = v2.file, v2.extra
            available[ds], selected[ds] = v2.available, v2.ids
            if (short := short_of_n(ds, v2.available, cfg.n)) is not None:
                warn(short)
            if cfg.tokenizer is not None:
                budgets[ds] = budgeter.budget("chat", limits[ds])
            rows_out.extend(v2.rows)
            continue
        assert files is not None
        rows, sha = files.read(ds)
        source["files"][ds] = {"file": files.describe(ds), "sha256": sha, "rows": len(rows)}
        by_id = {r.id: r for r in rows}
        available[ds] = len(by_id)
        if (short := short_of_n(ds, available[ds], cfg.n)) is not None:
            warn(short)
        ids = select_ids(list(by_id), seed=cfg.seed, dataset=ds, n=cfg.n)
        selected[ds] = ids
        limits[ds] = output_limit(specs[ds], ds, cfg.max_tokens)
        if cfg.tokenizer is not None:
            budgets[ds] = budgeter.budget(specs[ds].mode, limits[ds])
        budget = partial(budgeter.budget, specs[ds].mode)
        rows_out.extend(build_row(by_id[i], ds, specs[ds], limits[ds], cfg.tokenizer, budget) for i in ids)
    commit, dirty = git_state()
    header = InputsHeader(
        source=source,
        seed=cfg.seed,
        n=cfg.n,
        datasets=list(cfg.datasets),
        selected_ids=selected,
        templates=template_provenance(list(specs)),
        tokenizer=cfg.tokenizer.describe() if cfg.tokenizer else {"kind": "none"},
        max_input_tokens=budgets or None,
        max_tokens=limits,
        lbeval_version=lbeval_version(),
        git_commit=commit,
        git_dirty=dirty,
        n_taken={ds: len(ids) for ds, ids in selected.items()},
        n_available=available,
        extra=extra,
    )
    write_inputs(cfg.out, header, rows_out)
    return header, rows_out
