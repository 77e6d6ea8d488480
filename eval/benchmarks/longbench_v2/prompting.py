"""LongBench v2 prompts exactly as the official pred.py (THUDM/LongBench @ 2e00731f) builds them: pure text.

- `fill_template`: the chained `str.replace` of `$DOC$ $Q$ $C_A$ $C_B$ $C_C$ $C_D$`, in that order, with
  the `.strip()`-ed context, question and choices. The chain is literal: a context holding `$Q$` gets the
  question pasted in, a question holding `$DOC$` keeps it (already replaced).
- `zero_shot_prompt`, `cot_prompt` (CoT first call), `no_context_prompt`: that chain on `0shot.txt`,
  `0shot_cot.txt`, `0shot_no_context.txt`.
- `cot_answer_prompt`: the chain on `0shot_cot_ans.txt`, then `$COT$` -> the first call's output
  `.strip()`-ed. The official code still "replaces" `$DOC$` with the context here, but that template has
  no `$DOC$` ("The text is too long and omitted here."), so the document is not sent again.
- `rag_context`: the `--rag N` context: the first N retrieved chunks (retrieval order), re-sorted by their
  `c_idx` (position in the document), joined as "Retrieved chunk k: <content>" with blank lines between;
  `rag_prompt` fills `0shot_rag.txt` with it. (The Hub data has no `retrieved_context` field; the
  official README points to THUDM/LongCite's retrieve.py for producing it.)
- `truncate_middle`: pred.py's prompt truncation on token ids, `ids[:max_len//2] + ids[-max_len//2:]`
  when longer than max_len. Python parses `-max_len//2` as `(-max_len)//2`, so an odd max_len keeps one
  more token from the end (max_len=5: first 2, last 3). pred.py counts `tokenizer.encode(prompt)`, which
  for Hugging Face tokenizers includes special tokens such as BOS, and decodes the kept ids with
  `skip_special_tokens=True`; the caller owns tokenizing.

Request parameters of pred.py (one user chat message; the server applies the chat template):
`TEMPERATURE`, `MAX_NEW_TOKENS` (1024 for the CoT first call, 128 otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources

TEMPERATURE = 0.1
PROMPT_DIR = "v2"  # the templates' folder under prompts/ (prompts/v2/PROVENANCE.md)
COT_PLACEHOLDER = "$COT$"
MAX_NEW_TOKENS = 128
MAX_NEW_TOKENS_COT = 1024
TEMPLATE_FILES = {
    "zero_shot": "0shot.txt",
    "cot": "0shot_cot.txt",
    "cot_answer": "0shot_cot_ans.txt",
    "no_context": "0shot_no_context.txt",
    "rag": "0shot_rag.txt",
}


@dataclass(frozen=True)
class Templates:
    """The five official template texts (see prompts/v2/PROVENANCE.md)."""

    zero_shot: str
    cot: str
    cot_answer: str
    no_context: str
    rag: str


@dataclass(frozen=True)
class PromptFields:
    """The row fields a v2 prompt uses (unstripped, as in the data)."""

    context: str
    question: str
    choice_a: str
    choice_b: str
    choice_c: str
    choice_d: str


def load_templates() -> Templates:
    """Read prompts/v2/*.txt (text mode, UTF-8, like pred.py's `open(...).read()`)."""
    folder = resources.files("prompts").joinpath(PROMPT_DIR)
    texts = {key: folder.joinpath(name).read_text(encoding="utf-8") for key, name in TEMPLATE_FILES.items()}
    return Templates(**texts)


def fill_template(template: str, fields: PromptFields) -> str:
    """pred.py's replacement chain (without `$COT$`)."""
    return (
        template.replace("$DOC$", fields.context.strip())
        .replace("$Q$", fields.question.strip())
        .replace("$C_A$", fields.choice_a.strip())
        .replace("$C_B$", fields.choice_b.strip())
        .replace("$C_C$", fields.choice_c.strip())
        .replace("$C_D$", fields.choice_d.strip())
    )


def zero_shot_prompt(templates: Templates, fields: PromptFields) -> str:
    return fill_template(templates.zero_shot, fields)


def cot_prompt(templates: Templates, fields: PromptFields) -> str:
    return fill_template(templates.cot, fields)


def cot_answer_prompt(templates: Templates, fields: PromptFields, cot_output: str) -> str:
    """The second CoT call: `$COT$` is the first call's output, stripped, replaced after the chain."""
    return insert_cot(cot_answer_template(templates, fields), cot_output)


def cot_answer_template(templates: Templates, fields: PromptFields) -> str:
    """The second CoT call's prompt before the first call has run: the chain done, `$COT$` still in it."""
    return fill_template(templates.cot_answer, fields)


def insert_cot(answer_template: str, cot_output: str) -> str:
    """pred.py's last step of the second prompt: `.replace('$COT$', response)`, response = output.strip()."""
    return answer_template.replace(COT_PLACEHOLDER, cot_output.strip())


def no_context_prompt(templates: Templates, fields: PromptFields) -> str:
    return fill_template(templates.no_context, fields)


@dataclass(frozen=True)
class RetrievedChunk:
    """One entry of a row's `retrieved_context`: its position in the document and its text."""

    c_idx: int
    content: str


def rag_context(chunks: Sequence[RetrievedChunk], top_n: int) -> str:
    """pred.py's `--rag N` context (N > 0): the top N chunks in document order, numbered from 1."""
    kept = sorted(chunks[:top_n], key=lambda chunk: chunk.c_idx)
    return "\n\n".join(f"Retrieved chunk {k + 1}: {chunk.content}" for k, chunk in enumerate(kept))


def rag_prompt(
    templates: Templates, fields: PromptFields, chunks: Sequence[RetrievedChunk], top_n: int
) -> str:
    """`0shot_rag.txt` with `$DOC$` = `rag_context(chunks, top_n)` (then stripped, like any context)."""
    return fill_template(templates.rag, replace(fields, context=rag_context(chunks, top_n)))


def truncate_middle(token_ids: Sequence[int], max_len: int) -> list[int]:
    """pred.py's middle truncation: unchanged up to max_len ids, else the first and last halves."""
    if max_len < 1:
        raise ValueError(f"max_len must be positive, got {max_len}")
    ids = list(token_ids)
    if len(ids) <= max_len:
        return ids
    return ids[: max_len // 2] + ids[-max_len // 2 :]
