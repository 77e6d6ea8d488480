"""LongBench v2 CoT in `lbeval run` (fake server): the answer calls as records of their own, their prompts built
from each pass's reasoning, their salt and cache checks (also when a reasoning diverged), resume, reset mode."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from eval.benchmarks.longbench_v2.inputs import V2InputFields
from eval.prepare.inputs import InputRow, sha256_text, write_inputs
from eval.records.final import select_final
from eval.records.run_folder import RECORDS_NAME, load_run
from eval.records.types import RequestRecord
from eval.run.request import RequestSettings
from eval.run.runner import execute_run
from tests.eval.fake_fixtures import config_for, fake_fixture, make_header, make_row  # noqa: F401 - fixture
from tests.support.fake_server import CHAT_PREFIX, CHAT_SUFFIX, FakeServer, Fault, tokenize_text

BLOCK = 16
ANSWERS = ("cold_answer", "warm_answer", "repeat_answer")


def cot_row(i: int) -> InputRow:
    """A CoT input as prepare writes it: a reasoning prompt and an answer template with $COT$."""
    template = (
        f"Please read the following text and answer the questions below. The text is too long and omitted "
        f"here. What is the correct answer to this question: which item is ex{i}? Choices: (A) one (B) two "
        f"(C) three (D) four Let’s think step by step: $COT$ Based on the above, what is the single, most "
        f"likely answer choice?"
    )
    return make_row(
        i, dataset="longbench_v2", max_tokens=8, answers=["B"], extras=V2InputFields("cot", "easy", "short"),
        answer_template=template, answer_max_tokens=5,
    )  # fmt: skip


def write_cot_inputs(path: Path, rows: list[InputRow]) -> Path:
    write_inputs(path, make_header(datasets=["longbench_v2"], max_tokens={"longbench_v2": 8}), rows)
    return path


def run_cot(fake: FakeServer, tmp_path: Path, rows: list[InputRow] | None = None, **kw: Any) -> Path:
    inputs = write_cot_inputs(tmp_path / "inputs.jsonl", rows or [cot_row(0), cot_row(1)])
    return execute_run(config_for(fake, inputs, tmp_path / "runs", **kw))


def finals(run_dir: Path) -> dict[tuple[str, str], RequestRecord]:
    sel = select_final(load_run(run_dir).records)
    return {(s.example_id, s.pass_name): r for s, r in sel.final.items() if s.repetition == 0}


def chat_tokens(text: str) -> int:
    return len(CHAT_PREFIX) + len(tokenize_text(text)) + len(CHAT_SUFFIX)


def full_blocks(text: str) -> int:
    return (chat_tokens(text) - 1) // BLOCK * BLOCK


def test_each_answer_call_is_a_record_built_from_its_own_passes_reasoning(
    fake: FakeServer, tmp_path: Path
) -> None:
    run_dir = run_cot(fake, tmp_path)
    loaded = load_run(run_dir)
    assert loaded.manifest.complete and loaded.manifest.expected_records == 2 * (5 + 2 * 2 + 3)
    got = finals(run_dir)
    for i, row in enumerate((cot_row(0), cot_row(1))):
        ex = f"ex{i}"
        cold, warm = got[(ex, "cold")], got[(ex, "warm")]
        cold_a, warm_a, rep_a = (got[(ex, p)] for p in ANSWERS)
        for reasoning, answer in ((cold, cold_a), (warm, warm_a), (got[(ex, "repeat")], rep_a)):
            assert reasoning.settings["max_tokens"] == 8 and answer.settings["max_tokens"] == 5
            assert reasoning.output_text
            prompt = row.answer_template.replace("$COT$", reasoning.output_text.strip())  # type: ignore[union-attr]
            assert answer.prompt_sha256 == sha256_text(prompt)
            assert answer.usage.prompt_tokens == chat_tokens(prompt)
            assert answer.status == "ok" and answer.scenario == "cache"
        assert [got[(ex, p)].variation for p in ANSWERS] == [
            {"call": "answer", "reasoning": p} for p in ("cold", "warm", "repeat")
        ]
        assert cold.variation == {} and warm.variation == {}
        # the answer calls' own salt: fresh for cold_answer, shared by the warm and repeat answer calls
        assert cold_a.cache_salt not in (None, cold.cache_salt)
        assert warm_a.cache_salt == rep_a.cache_salt == cold_a.cache_salt
        assert cold_a.usage.cached_tokens == 0 and cold_a.expected_cached_tokens == 0
        # greedy, same reasoning: the warm answer call's prompt is cold_answer's, all its full blocks cached
        assert warm.output_text == cold.output_text and warm_a.prompt_sha256 == cold_a.prompt_sha256
        prompt = row.answer_template.replace("$COT$", cold.output_text.strip())  # type: ignore[union-attr]
        assert warm_a.usage.cached_tokens == warm_a.expected_cached_tokens == full_blocks(prompt)
    seqs = [r.seq for r in loaded.records if r.example_id == "ex0"]
    order = [r.pass_name for r in sorted(loaded.records, key=lambda r: r.seq) if r.example_id == "ex0"]
    assert order[:8] == ["cold", "warm", "repeat", "control_salt", "control_sibling", *ANSWERS]
    assert seqs == sorted(seqs)


def test_a_diverged_reasoning_is_measured_on_the_shared_prefix_not_called_a_miss(
    fake: FakeServer, tmp_path: Path
) -> None:
    """The warm reasoning diverges (the fake's divergence fault on the warm request of ex0's reasoning prompt):
    the warm answer call's prompt then differs from cold_answer's after the reasoning's first tokens."""
    row = cot_row(0)
    fake.add_fault(Fault("divergence", match="Example ex0:", salt_seen=1, position=3))
    run_dir = run_cot(fake, tmp_path, rows=[row], passes=("cold", "warm", "repeat"))
    got = finals(run_dir)
    cold, warm = got[("ex0", "cold")], got[("ex0", "warm")]
    assert cold.output_text != warm.output_text
    cold_a, warm_a = got[("ex0", "cold_answer")], got[("ex0", "warm_answer")]
    assert cold_a.prompt_sha256 != warm_a.prompt_sha256
    a = row.answer_template.replace("$COT$", cold.output_text.strip())  # type: ignore[union-attr]
    b = row.answer_template.replace("$COT$", warm.output_text.strip())  # type: ignore[union-attr]
    ids_a, ids_b = tokenize_text(a), tokenize_text(b)
    shared = len(CHAT_PREFIX) + next(k for k, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)) if x != y)
    expected = min(shared, chat_tokens(b) - 1) // BLOCK * BLOCK
    assert warm_a.status == "ok" and warm_a.attempt == 0  # no re-prime: only the shared prefix can be cached
    assert warm_a.expected_cached_tokens == expected < full_blocks(b)
    assert warm_a.usage.cached_tokens is not None and warm_a.usage.cached_tokens >= expected
    # the repeat reasoning is cold's again (only warm diverged): its answer prompt is cold_answer's, measured
    # against warm_answer's (its reference) on the shared prefix, and it finds all of cold_answer's blocks
    rep, rep_a = got[("ex0", "repeat")], got[("ex0", "repeat_answer")]
    assert rep.output_text == cold.output_text and rep_a.prompt_sha256 == cold_a.prompt_sha256
    assert (
        rep_a.status == "ok"
        and rep_a.expected_cached_tokens == min(shared, chat_tokens(a) - 1) // BLOCK * BLOCK
    )
    assert rep_a.usage.cached_tokens == full_blocks(a)


def test_an_interrupted_cot_unit_resumes_with_the_answer_salt_and_the_reasoning_on_disk(
    fake: FakeServer, tmp_path: Path
) -> None:
    run_dir = run_cot(fake, tmp_path, rows=[cot_row(0)], passes=("cold", "warm", "repeat"))
    path = run_dir / RECORDS_NAME
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 6
    before = finals(run_dir)
    path.write_bytes(b"".join(lines[:4]))  # cold, warm, repeat, cold_answer kept
    execute_run(
        config_for(fake, tmp_path / "inputs.jsonl", tmp_path / "runs", passes=("cold", "warm", "repeat"))
    )
    loaded = load_run(run_dir)
    assert loaded.manifest.complete and len(loaded.records) == 6
    after = finals(run_dir)
    cold_a = after[("ex0", "cold_answer")]
    for p in ("warm_answer", "repeat_answer"):
        rec = after[("ex0", p)]
        assert rec.group == 0 and rec.cache_salt == cold_a.cache_salt  # the same group, continued
        assert rec.prompt_sha256 == before[("ex0", p)].prompt_sha256
        assert rec.usage.cached_tokens == rec.expected_cached_tokens and rec.status == "ok"


def test_reset_mode_resets_before_each_cold_call(fake: FakeServer, tmp_path: Path) -> None:
    run_dir = run_cot(
        fake, tmp_path, rows=[cot_row(0)], passes=("cold", "warm", "repeat", "controls"), cold_mode="reset"
    )
    got = finals(run_dir)
    assert load_run(run_dir).manifest.complete
    assert all(got[("ex0", p)].status == "ok" for p in ("cold", "warm", "repeat", *ANSWERS))
    assert (
        got[("ex0", "cold_answer")].cache_salt is None
        and got[("ex0", "cold_answer")].usage.cached_tokens == 0
    )
    assert (
        got[("ex0", "warm_answer")].usage.cached_tokens == got[("ex0", "warm_answer")].expected_cached_tokens
    )


def test_max_tokens_override_applies_to_both_calls_and_zero_shot_rows_have_no_answer_call(
    fake: FakeServer, tmp_path: Path
) -> None:
    zero = replace(
        cot_row(1),
        extras=V2InputFields("0shot", "easy", "short"),
        answer_template=None,
        answer_max_tokens=None,
    )
    run_dir = run_cot(
        fake,
        tmp_path,
        rows=[cot_row(0), zero],
        passes=("cold", "warm"),
        request=RequestSettings(seed=3, max_tokens_override=2),
    )
    got = finals(run_dir)
    assert {p for (ex, p) in got if ex == "ex1"} == {"cold", "warm"}
    assert {p for (ex, p) in got if ex == "ex0"} == {"cold", "warm", "cold_answer", "warm_answer"}
    assert all(r.settings["max_tokens"] == 2 for r in got.values())
