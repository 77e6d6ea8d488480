"""Prompts as the official pred.py builds them: the replacement chain, CoT, no-context, RAG, truncation."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.benchmarks.longbench_v2 import prompting
from eval.benchmarks.longbench_v2.prompting import PromptFields, RetrievedChunk, Templates

V2 = Path(__file__).resolve().parents[4] / "prompts" / "v2"
FIELDS = PromptFields(
    context="  The lamp was lit in spring.\n", question=" Who lit it? ", choice_a="Ann ",
    choice_b=" Bo", choice_c="Cy", choice_d="\tDee\n",
)  # fmt: skip


def test_load_templates_reads_the_v2_files_unchanged() -> None:
    templates = prompting.load_templates()
    for key, name in prompting.TEMPLATE_FILES.items():
        assert getattr(templates, key) == (V2 / name).read_bytes().decode("utf-8")


def test_zero_shot_prompt_on_the_official_template() -> None:
    expected = (
        "Please read the following text and answer the question below.\n\n<text>\n"
        "The lamp was lit in spring.\n</text>\n\n"
        "What is the correct answer to this question: Who lit it?\nChoices:\n"
        "(A) Ann\n(B) Bo\n(C) Cy\n(D) Dee\n\n"
        'Format your response as follows: "The correct answer is (insert answer here)".'
    )
    assert prompting.zero_shot_prompt(prompting.load_templates(), FIELDS) == expected


def test_cot_answer_prompt_omits_the_document_and_pastes_the_stripped_cot() -> None:
    prompt = prompting.cot_answer_prompt(prompting.load_templates(), FIELDS, "\n First, the lamp... \n")
    assert "The lamp was lit" not in prompt
    assert "The text is too long and omitted here." in prompt
    assert "Let\u2019s think step by step: First, the lamp...\n\nBased on the above" in prompt
    assert "(D) Dee\n" in prompt


def test_cot_and_no_context_prompts() -> None:
    templates = prompting.load_templates()
    cot = prompting.cot_prompt(templates, FIELDS)
    assert cot.endswith("(D) Dee\n\nLet\u2019s think step by step:")
    assert "<text>\nThe lamp was lit in spring.\n</text>" in cot
    no_context = prompting.no_context_prompt(templates, FIELDS)
    assert no_context.startswith(
        "What is the correct answer to this question: Who lit it?\nChoices:\n(A) Ann"
    )
    assert "lamp" not in no_context


TOY = Templates(
    zero_shot="[$DOC$|$Q$|$C_A$|$C_B$|$C_C$|$C_D$]", cot="$DOC$ $Q$", cot_answer="$DOC$/$Q$/$COT$",
    no_context="$Q$ $C_A$", rag="<$DOC$> $Q$",
)  # fmt: skip
CHAIN_CASES = [
    # (fields, expected zero-shot on TOY, why)
    (PromptFields("d", "q", "a", "b", "c", "e"), "[d|q|a|b|c|e]", "plain"),
    (
        PromptFields("see $Q$", "q", "a", "b", "c", "e"),
        "[see q|q|a|b|c|e]",
        "context's $Q$ gets the question",
    ),
    (PromptFields("d", "q $DOC$", "a", "b", "c", "e"), "[d|q $DOC$|a|b|c|e]", "question's $DOC$ stays"),
    (PromptFields("d", "q", "$C_B$", "b", "c", "e"), "[d|q|b|b|c|e]", "choice A's $C_B$ gets choice B"),
    (PromptFields("d", "q", "a", "$C_A$", "c", "e"), "[d|q|a|$C_A$|c|e]", "choice B's $C_A$ stays"),
    (
        PromptFields("d $COT$", "q", "a", "b", "c", "e"),
        "[d $COT$|q|a|b|c|e]",
        "no $COT$ step outside cot_ans",
    ),
]


@pytest.mark.parametrize(("fields", "expected", "why"), CHAIN_CASES, ids=[c[2] for c in CHAIN_CASES])
def test_replacement_chain_order(fields: PromptFields, expected: str, why: str) -> None:
    assert prompting.zero_shot_prompt(TOY, fields) == expected, why


def test_cot_replaced_last_so_placeholders_in_fields_become_the_cot() -> None:
    fields = PromptFields("doc", "q $COT$", "a", "b", "c", "e")
    assert prompting.cot_answer_prompt(TOY, fields, " why $Q$ ") == "doc/q why $Q$/why $Q$"


def test_rag_context_keeps_top_n_then_sorts_by_position() -> None:
    chunks = [RetrievedChunk(7, "seven"), RetrievedChunk(2, "two"), RetrievedChunk(5, "five")]
    assert prompting.rag_context(chunks, 2) == "Retrieved chunk 1: two\n\nRetrieved chunk 2: seven"
    assert prompting.rag_prompt(TOY, FIELDS, chunks, 1) == "<Retrieved chunk 1: seven> Who lit it?"


TRUNCATION_CASES = [
    # (ids, max_len, expected): ids[:max_len//2] + ids[-max_len//2:] when too long, (-5)//2 == -3
    ([1, 2, 3], 3, [1, 2, 3]),
    ([1, 2, 3], 5, [1, 2, 3]),
    ([1, 2, 3, 4, 5, 6], 4, [1, 2, 5, 6]),
    ([1, 2, 3, 4, 5, 6, 7], 5, [1, 2, 5, 6, 7]),
    ([1, 2, 3], 1, [3]),
    ([], 2, []),
]


@pytest.mark.parametrize(("ids", "max_len", "expected"), TRUNCATION_CASES)
def test_truncate_middle(ids: list[int], max_len: int, expected: list[int]) -> None:
    assert prompting.truncate_middle(ids, max_len) == expected


def test_truncate_middle_rejects_a_non_positive_limit() -> None:
    with pytest.raises(ValueError, match="max_len"):
        prompting.truncate_middle([1, 2], 0)


def test_request_parameters_of_pred_py() -> None:
    assert (prompting.TEMPERATURE, prompting.MAX_NEW_TOKENS, prompting.MAX_NEW_TOKENS_COT) == (0.1, 128, 1024)
