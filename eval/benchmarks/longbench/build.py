"""LongBench v1 rows -> input rows: the dataset's official template, pred.py's middle truncation, the output limit.

The input budget is the prepare stage's (`budget(output_limit)`, eval/prepare/build.py's Budgeter); a dataset that
stops at a newline (`stop_at_newline` in prompts/datasets.toml) sends the tokenizer's newline id as a stop token.
`LongBenchPart` is what prepare calls (eval/prepare/benchmark_part.py): every v1 dataset read from one source.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from eval.benchmarks.longbench.prompting import middle_truncate
from eval.benchmarks.longbench.sources import DatasetFiles, Row, hub_download, open_source
from eval.benchmarks.longbench.spec import (
    PROMPT_FILES,
    TEMPLATE_ORIGIN,
    DatasetSpec,
    base_name,
    get_spec,
    read_prompt_file,
)
from eval.prepare.benchmark_part import DatasetPart, HeaderPart, PrepareJob
from eval.prepare.inputs import InputRow, sha256_text
from eval.prepare.select import select_ids
from eval.prepare.tokenizers import Tokenizer

NAME = "longbench"  # the registry's name of this benchmark (eval/benchmark_registry.py)


def output_limit(spec: DatasetSpec, dataset: str, overrides: Mapping[str, int]) -> int:
    return overrides.get(dataset, overrides.get(base_name(dataset), spec.max_tokens))


def template_provenance(datasets: list[str]) -> dict[str, Any]:
    """The inputs header's `templates`: the prompt files' SHA-256 and each v1 dataset's template's."""
    files = {name: hashlib.sha256(read_prompt_file(name)).hexdigest() for name in PROMPT_FILES}
    return {
        "origin": TEMPLATE_ORIGIN,
        "files": files,
        "template_sha256": {ds: sha256_text(get_spec(ds).template) for ds in datasets},
    }


def build_row(
    row: Row,
    dataset: str,
    spec: DatasetSpec,
    max_tokens: int,
    tokenizer: Tokenizer | None,
    budget: Callable[[int], int],
) -> InputRow:
    """One input row; `budget(output_limit)` is the input budget of a call in the dataset's mode."""
    prompt = spec.format(context=row.context, input=row.input)
    tokens: int | None = None
    truncated = False
    stop_ids: list[int] | None = None
    if tokenizer is not None:
        cut = middle_truncate(prompt, tokenizer, budget(max_tokens))
        prompt, truncated = cut.text, cut.truncated
        tokens = len(tokenizer.encode(prompt)) if truncated else cut.original_tokens
        if spec.stop_at_newline:
            stop_ids = [tokenizer.encode("\n")[-1]]
    return InputRow(
        dataset=dataset,
        id=row.id,
        prompt=prompt,
        mode=spec.mode,
        max_tokens=max_tokens,
        prompt_sha256=sha256_text(prompt),
        prompt_tokens=tokens,
        truncated=truncated,
        answers=row.answers,
        all_classes=row.all_classes,
        length=row.length,
        stop_token_ids=stop_ids,
    )


class LongBenchPart:
    """prepare's part of LongBench v1 (eval/prepare/benchmark_part.py): its datasets' files from one source."""

    def __init__(self, job: PrepareJob, datasets: Sequence[str]) -> None:
        self.job = job
        self.specs = {ds: get_spec(ds) for ds in datasets}
        self.files: DatasetFiles | None = None
        self.source: dict[str, Any] | None = None

    def open(self) -> None:
        if self.specs:
            self.files, self.source = open_source(self.job.source, self.job.downloads.get(NAME, hub_download))

    def dataset(self, dataset: str) -> DatasetPart:
        job, spec = self.job, self.specs[dataset]
        assert self.files is not None
        rows, sha = self.files.read(dataset)
        file = {"file": self.files.describe(dataset), "sha256": sha, "rows": len(rows)}
        by_id = {r.id: r for r in rows}
        ids = select_ids(list(by_id), seed=job.seed, dataset=dataset, n=job.n)
        limit = output_limit(spec, dataset, job.max_tokens)
        budget = job.budget(spec.mode, limit) if job.tokenizer is not None else None
        call_budget = partial(job.budget, spec.mode)
        built = [build_row(by_id[i], dataset, spec, limit, job.tokenizer, call_budget) for i in ids]
        return DatasetPart(built, ids, len(by_id), limit, budget, file)

    def header(self) -> HeaderPart:
        """The provenance of the source read; the prompt files' SHA-256 always (also with no v1 dataset)."""
        return HeaderPart(self.source, template_provenance(list(self.specs)), {})
