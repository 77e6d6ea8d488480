"""LongBench v2 rows -> input rows: the official template of the mode, pred.py's middle truncation, the CoT answer
call's template.

Prompt: `eval.benchmarks.longbench_v2.prompting` fills the mode's template exactly as the official pred.py does (the
chained replace of `$DOC$ $Q$ $C_A$ .. $C_D$` with the stripped fields).

Truncation (pred.py's `query_llm`): the WHOLE templated prompt is tokenized with the served model's tokenizer
(with its special tokens, as `tokenizer.encode` does); longer than the budget L, it keeps `ids[:L//2] +
ids[-L//2:]` (for an odd L one more token from the end) and decodes the kept ids in one piece without special
tokens. L is the model's window minus the call's output limit minus the chat template's overhead, as for v1 (the
official script uses a fixed per-model max_len instead). Should re-tokenizing the decoded text give more than L
tokens (a merge at the cut), the cut is made again that many tokens shorter, so every prompt fits its budget.

CoT: the row's prompt is the reasoning call's (0shot_cot.txt, output limit 1,024); `answer_template` holds the
answer call's prompt (0shot_cot_ans.txt filled like the official script: its `$DOC$` is replaced too, but the
template has none, "The text is too long and omitted here."), with `$COT$` left where the run stage puts the
reasoning call's stripped output. Prepare checks that this prompt, with as many tokens as the reasoning call may
generate, fits the window with the answer call's own limit, so the run never needs to truncate it.

`LongBenchV2Part` is what prepare calls (eval/prepare/benchmark_part.py); the header's extra["longbench_v2"]
records the mode, the templates and the answer call's limits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from eval.benchmarks.longbench_v2.inputs import V2InputFields
from eval.benchmarks.longbench_v2.prompting import (
    COT_PLACEHOLDER,
    PromptFields,
    Templates,
    cot_answer_template,
    fill_template,
    load_templates,
    truncate_middle,
)
from eval.benchmarks.longbench_v2.sources import (
    HUB_DATA_SHA256,
    HUB_FILENAME,
    V2Downloader,
    V2Row,
    hub_download_v2,
    open_v2,
)
from eval.benchmarks.longbench_v2.spec import (
    TEMPLATE_ORIGIN,
    V2_CHAT_MODE,
    V2_DATASET,
    V2Mode,
    V2Options,
    get_v2_mode,
    template_sha256,
)
from eval.errors import ConfigError
from eval.prepare.benchmark_part import DatasetPart, HeaderPart, PrepareJob
from eval.prepare.data_source import DataSource
from eval.prepare.inputs import InputRow, sha256_text
from eval.prepare.select import select_ids
from eval.prepare.tokenizers import Tokenizer

MAX_RECUTS = 4
NAME = "longbench_v2"  # the registry's name of this benchmark (eval/benchmark_registry.py)


@dataclass(frozen=True)
class V2Cut:
    """A v2 prompt after truncation: its text, tokens before and after, whether it was cut."""

    text: str
    original_tokens: int
    tokens: int
    truncated: bool


def prompt_fields(row: V2Row) -> PromptFields:
    return PromptFields(row.context, row.question, row.choice_a, row.choice_b, row.choice_c, row.choice_d)


def mode_template(templates: Templates, key: str) -> str:
    text: str = getattr(templates, key)
    return text


def truncate_v2(prompt: str, tokenizer: Tokenizer, budget: int) -> V2Cut:
    """pred.py's middle truncation of the whole prompt (see the module docstring)."""
    if budget < 2:
        raise ConfigError(f"input budget of {budget} tokens is too small to truncate into two halves")
    ids = tokenizer.encode(prompt)
    if len(ids) <= budget:
        return V2Cut(prompt, len(ids), len(ids), False)
    limit = budget
    for _ in range(MAX_RECUTS):
        text = tokenizer.decode(truncate_middle(ids, limit))
        tokens = len(tokenizer.encode(text))
        if tokens <= budget:
            return V2Cut(text, len(ids), tokens, True)
        limit -= tokens - budget
    raise ConfigError(f"could not cut a {len(ids)}-token prompt to {budget} tokens (re-tokenizing grows it)")


def answer_call_fits(
    row_id: str, answer_prompt: str, tokenizer: Tokenizer, cot_tokens: int, answer_budget: int
) -> None:
    """The answer call's prompt with `cot_tokens` of reasoning must fit its budget (else: a ConfigError)."""
    fixed = len(tokenizer.encode(answer_prompt.replace(COT_PLACEHOLDER, "")))
    if fixed + cot_tokens > answer_budget:
        raise ConfigError(
            f"{V2_DATASET}/{row_id}: the CoT answer call needs {fixed} prompt tokens plus up to {cot_tokens} of "
            f"reasoning, over its input budget of {answer_budget}; lower the reasoning call's limit "
            f"(--max-tokens {V2_DATASET}=N)"
        )


def build_v2_row(
    row: V2Row,
    mode: V2Mode,
    templates: Templates,
    max_tokens: int,
    tokenizer: Tokenizer | None,
    budget: Callable[[int], int],
) -> InputRow:
    """One input row; `budget(output_limit)` is the input budget of a chat call with that output limit."""
    fields = prompt_fields(row)
    prompt = fill_template(mode_template(templates, mode.template), fields)
    answer_prompt = cot_answer_template(templates, fields) if mode.answer_template is not None else None
    cut: V2Cut | None = None
    if tokenizer is not None:
        cut = truncate_v2(prompt, tokenizer, budget(max_tokens))
        prompt = cut.text
        if answer_prompt is not None and mode.answer_max_tokens is not None:
            answer_call_fits(row.id, answer_prompt, tokenizer, max_tokens, budget(mode.answer_max_tokens))
    return InputRow(
        dataset=V2_DATASET,
        id=row.id,
        prompt=prompt,
        mode=V2_CHAT_MODE,
        max_tokens=max_tokens,
        prompt_sha256=sha256_text(prompt),
        prompt_tokens=cut.tokens if cut is not None else None,
        truncated=cut.truncated if cut is not None else False,
        answers=[row.answer],
        all_classes=None,
        length=len(row.context.split()),
        answer_template=answer_prompt,
        answer_max_tokens=mode.answer_max_tokens,
        extras=V2InputFields(
            mode.name, row.difficulty, row.length, cut.original_tokens if cut is not None else None
        ),
    )


@dataclass(frozen=True)
class V2Prepared:
    """What prepare takes from the v2 data: the selected rows built, and what the header records."""

    rows: list[InputRow]
    ids: list[str]
    available: int
    file: dict[str, Any]  # the header's source["files"]["longbench_v2"]
    source: dict[str, Any]  # the v2 source's provenance (the header's `source` when only v2 is prepared)
    extra: dict[str, Any]  # the header's extra["longbench_v2"]: mode, templates, the answer call's limits


def prepare_v2(
    source: DataSource,
    mode: V2Mode,
    *,
    n: int | None,
    seed: int,
    max_tokens: int,
    tokenizer: Tokenizer | None,
    budget: Callable[[int], int],
    download: V2Downloader = hub_download_v2,
) -> V2Prepared:
    """Read and validate the v2 data, select a seeded subset (the same for every mode), build its rows."""
    loaded, prov = open_v2(source, download)
    by_id = {r.id: r for r in loaded.rows}
    ids = select_ids(list(by_id), seed=seed, dataset=V2_DATASET, n=n)
    templates = load_templates()
    rows = [build_v2_row(by_id[i], mode, templates, max_tokens, tokenizer, budget) for i in ids]
    where = (
        f"hf://datasets/{prov['repo']}@{prov['revision']}/{HUB_FILENAME}"
        if prov["kind"] == "hub"
        else str(loaded.path)
    )
    extra: dict[str, Any] = {
        "mode": mode.name, "template_origin": TEMPLATE_ORIGIN, "template_sha256": template_sha256(mode),
        "answer_max_tokens": mode.answer_max_tokens,
        "answer_max_input_tokens": budget(mode.answer_max_tokens) if tokenizer and mode.answer_max_tokens else None,
        "truncation": "pred.py: ids[:L//2] + ids[-L//2:] of the whole templated prompt, decoded in one piece",
    }  # fmt: skip
    file = {
        "file": where,
        "sha256": loaded.sha256,
        "rows": len(loaded.rows),
        "pinned_sha256": HUB_DATA_SHA256,
    }
    return V2Prepared(rows, ids, len(by_id), file, prov, extra)


class LongBenchV2Part:
    """prepare's part of LongBench v2 (eval/prepare/benchmark_part.py): --v2-mode checked when made (also without
    the v2 dataset), the dataset read, selected and built by prepare_v2."""

    def __init__(self, job: PrepareJob, datasets: Sequence[str]) -> None:
        self.job = job
        options = job.options.get(NAME, V2Options())
        if not isinstance(options, V2Options):
            raise TypeError(f"{NAME}'s prepare options must be V2Options, got {type(options).__name__}")
        self.mode = get_v2_mode(options.mode)
        self.prepared: V2Prepared | None = None

    def open(self) -> None:
        """Nothing shared: prepare_v2 reads the source."""

    def dataset(self, dataset: str) -> DatasetPart:
        job = self.job
        limit = job.max_tokens.get(dataset, self.mode.max_tokens)
        self.prepared = v2 = prepare_v2(
            job.source, self.mode, n=job.n, seed=job.seed, max_tokens=limit, tokenizer=job.tokenizer,
            budget=partial(job.budget, V2_CHAT_MODE), download=job.downloads.get(NAME, hub_download_v2),
        )  # fmt: skip
        budget = job.budget(V2_CHAT_MODE, limit) if job.tokenizer is not None else None
        return DatasetPart(v2.rows, v2.ids, v2.available, limit, budget, v2.file)

    def header(self) -> HeaderPart:
        v2 = self.prepared
        return HeaderPart(None, {}, {}) if v2 is None else HeaderPart(v2.source, {}, {V2_DATASET: v2.extra})
