"""LongBench v2 end to end against the real vLLM CPU server (4,096-token window): prepare -> run -> score ->
compare -> gate on the shipped longbench_v2_mini sample (NOT LongBench data).

- prepare: all six items, 0-shot; every templated prompt (4,493-12,002 tokens with SmolLM2's tokenizer) is cut
  in the middle to the budget. The cut is re-derived here from the server's own /tokenize and /detokenize.
- 0-shot: one item, cold and warm, 16 output tokens, run twice (two variant names on the same server), scored,
  compared, gated; the accuracy is recomputed here from the records with the official regexes written out again.
- CoT: one item, reasoning then answer call, 24 output tokens each (`lbeval run --max-tokens 24`).
Expected values come from the records and the server's rules (blocks of 128 tokens, never the last prompt
token), never from an earlier run. Cost: three cold requests of 3,000-4,000 prompt tokens, five warm or short ones;
the measurements are printed (pytest -s or -rP).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from eval.benchmarks.longbench_v2.inputs import v2_fields
from eval.benchmarks.longbench_v2.sources import mini_file
from eval.cli import main
from eval.prepare.inputs import InputRow, read_inputs, sha256_text
from eval.records.final import select_final
from eval.records.run_folder import load_run
from eval.records.types import RequestRecord
from tests.real_server.conftest import RealServer

pytestmark = pytest.mark.real_server

BLOCK = 128
WINDOW = 4096
OUT_TOKENS = 16
COT_TOKENS = 24
V2 = Path(__file__).resolve().parents[2] / "prompts" / "v2"
MEASURED: dict[str, Any] = {}


def lbeval(*argv: str) -> int:
    return main(list(argv))


def full_blocks(prompt_tokens: int) -> int:
    return (prompt_tokens - 1) // BLOCK * BLOCK


def official_letter(response: str) -> str | None:
    """pred.py's extract_answer, written out again (independent of scorers.longbench_v2)."""
    text = response.strip().replace("*", "")
    match = re.search(r"The correct answer is \(([A-D])\)", text) or re.search(
        r"The correct answer is ([A-D])", text
    )
    return match.group(1) if match else None


def official_prompt(template: str, item: dict[str, str]) -> str:
    text = (V2 / template).read_text(encoding="utf-8")
    for key, field in (("$DOC$", "context"), ("$Q$", "question"), ("$C_A$", "choice_A"), ("$C_B$", "choice_B"),
                       ("$C_C$", "choice_C"), ("$C_D$", "choice_D")):  # fmt: skip
        text = text.replace(key, item[field].strip())
    return text


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("v2")


def prepare(server: RealServer, out: Path, *extra: str) -> tuple[Any, list[InputRow]]:
    start = time.monotonic()
    argv = ["prepare", "--source", "mini", "--datasets", "longbench_v2", "--base-url", server.base_url]
    assert lbeval(*argv, "--out", str(out), *extra) == 0
    MEASURED[f"prepare {out.name}"] = round(time.monotonic() - start, 1)
    return read_inputs(out)


def run(
    server: RealServer, inputs: Path, work: Path, variant: str, *extra: str, passes: str = "cold,warm"
) -> Path:
    start = time.monotonic()
    argv = ["run", "--variant", variant, "--base-url", server.base_url, "--inputs", str(inputs)]
    argv += ["--scenarios", "cache"]  # the cache-only plan (docs/scenarios.md)
    code = lbeval(*argv, "--out", str(work / "runs"), "--run-id", "r", "--quiet", "--passes", passes, *extra)
    assert code == 0
    MEASURED[f"run {variant}"] = round(time.monotonic() - start, 1)
    return work / "runs" / variant / "r"


def finals(run_dir: Path) -> dict[tuple[str, str], RequestRecord]:
    return {(s.example_id, s.pass_name): r for s, r in select_final(load_run(run_dir).records).final.items()}


def test_prepare_cuts_every_whole_prompt_in_the_middle_with_the_servers_tokenizer(
    real_server: RealServer, work: Path
) -> None:
    header, rows = prepare(real_server, work / "all.jsonl", "--n", "all")
    budget = header.max_input_tokens["longbench_v2"]
    root = real_server.base_url.removesuffix("/v1")
    chat = httpx2.post(f"{root}/tokenize", json={"model": "smollm2", "messages": [{"role": "user", "content": "x"}],
                                                "add_generation_prompt": True}, timeout=60).json()["count"]  # fmt: skip
    bare = len(
        httpx2.post(f"{root}/tokenize", json={"model": "smollm2", "prompt": "x"}, timeout=60).json()["tokens"]
    )
    assert budget == WINDOW - 128 - (
        chat - bare
    )  # window - the 0-shot output limit - the chat template's tokens
    items = {i["_id"]: i for i in json.loads(mini_file().read_text(encoding="utf-8"))}
    assert sorted(r.id for r in rows) == sorted(items)
    for row in rows:
        full = official_prompt("0shot.txt", items[row.id])
        ids = httpx2.post(f"{root}/tokenize", json={"model": "smollm2", "prompt": full}, timeout=60).json()[
            "tokens"
        ]
        assert v2_fields(row).original_tokens == len(ids) > budget and row.truncated
        kept = ids[: budget // 2] + ids[-budget // 2 :]  # pred.py: first and last max_len//2 tokens
        text = httpx2.post(
            f"{root}/detokenize", json={"model": "smollm2", "tokens": kept}, timeout=60
        ).json()["prompt"]
        assert row.prompt == text
        assert row.prompt_tokens is not None and row.prompt_tokens <= budget
        assert row.prompt.startswith("Please read the following text and answer the question below.")
        assert row.prompt.endswith(
            'Format your response as follows: "The correct answer is (insert answer here)".'
        )
    by_id = {r.id: r for r in rows}
    assert "Ilse Varden" in by_id["lbv2mini-0001"].prompt  # a fact near the start survives
    assert "DAILY_LATE_FEE = 3" not in by_id["lbv2mini-0002"].prompt  # the middle of 0002 is cut out
    MEASURED["budget"] = budget
    MEASURED["tokens before -> after"] = {
        r.id: f"{v2_fields(r).original_tokens} -> {r.prompt_tokens}" for r in rows
    }


def test_zero_shot_run_score_compare_and_gate(real_server: RealServer, work: Path) -> None:
    _, rows = prepare(real_server, work / "zero.jsonl", "--n", "1")
    inputs = work / "zero.jsonl"
    base = run(real_server, inputs, work, "v2-base", "--max-tokens", str(OUT_TOKENS))
    again = run(real_server, inputs, work, "v2-again", "--max-tokens", str(OUT_TOKENS))
    got = finals(base)
    right = 0
    for row in rows:
        cold, warm = got[(row.id, "cold")], got[(row.id, "warm")]
        assert cold.status == warm.status == "ok"
        n = cold.usage.prompt_tokens
        assert (
            n is not None and n + OUT_TOKENS <= WINDOW and n > 3000
        )  # the truncated prompt filled the window
        assert cold.usage.cached_tokens == 0 and warm.usage.cached_tokens == full_blocks(n)
        right += official_letter(cold.output_text or "") == row.answers[0]
    assert lbeval("score", str(base)) == 0
    scores = json.loads((base / "scores.json").read_text())
    (acc,) = scores["accuracy"]
    v2 = acc["v2"]["cold"]
    assert v2["lbeval"]["overall"] == pytest.approx(100 * right) and v2["n"]["overall"] == 1
    assert v2["dropped"]["overall"] == 0 and v2["official"] == v2["lbeval"]  # every output counted
    out = work / "compare"
    runs = str(work / "runs")
    assert lbeval("compare", "v2-base", "v2-again", "--runs", runs, "--out", str(out)) == 0
    summary = json.loads((out / "summary.json").read_text())
    table = summary["tables"]["accuracy_v2"]
    assert [r["key"] for r in table["rows"]][:2] == ["cold:base:lbeval", "cold:variant:lbeval"]
    assert table["rows"][0]["cells"]["overall"] == round(100.0 * right, 1)
    policy = work / "policy.toml"
    policy.write_text("schema_version = 1\n[rules.cold_scores]\ntolerance_points = 0.0\n[rules.no_errors]\n")
    # the same server twice: the same cold outputs, so the same v2 scores
    assert lbeval("gate", "v2-base", "v2-again", "--runs", runs, "--policy", str(policy)) == 0
    assert finals(again)[(rows[0].id, "cold")].output_text == got[(rows[0].id, "cold")].output_text


def test_cot_reasoning_then_answer_call(real_server: RealServer, work: Path) -> None:
    _, rows = prepare(real_server, work / "cot.jsonl", "--n", "1", "--v2-mode", "cot")
    (row,) = rows
    assert row.max_tokens == 1024 and row.answer_max_tokens == 128 and row.truncated
    assert row.prompt_tokens is not None and row.prompt_tokens <= WINDOW - 1024 - 20
    run_dir = run(real_server, work / "cot.jsonl", work, "v2-cot", "--max-tokens", str(COT_TOKENS))
    got = finals(run_dir)
    assert set(got) == {(row.id, p) for p in ("cold", "warm", "cold_answer", "warm_answer")}
    assert row.answer_template is not None
    for p in ("cold", "warm"):
        reasoning, answer = got[(row.id, p)], got[(row.id, f"{p}_answer")]
        assert reasoning.status == answer.status == "ok"
        expected_prompt = row.answer_template.replace("$COT$", (reasoning.output_text or "").strip())
        assert answer.prompt_sha256 == sha256_text(expected_prompt)
        assert answer.settings["max_tokens"] == COT_TOKENS == reasoning.settings["max_tokens"]
    cold_a, warm_a = got[(row.id, "cold_answer")], got[(row.id, "warm_answer")]
    assert cold_a.cache_salt != got[(row.id, "cold")].cache_salt and warm_a.cache_salt == cold_a.cache_salt
    assert cold_a.usage.cached_tokens == 0
    assert warm_a.expected_cached_tokens is not None and warm_a.usage.cached_tokens is not None
    assert warm_a.usage.cached_tokens >= warm_a.expected_cached_tokens
    if got[(row.id, "cold")].output_text == got[(row.id, "warm")].output_text:
        assert warm_a.prompt_sha256 == cold_a.prompt_sha256
        assert warm_a.usage.prompt_tokens is not None
        assert warm_a.usage.cached_tokens == full_blocks(warm_a.usage.prompt_tokens)
    assert lbeval("score", str(run_dir)) == 0
    v2 = json.loads((run_dir / "scores.json").read_text())["accuracy"][0]["v2"]["cold"]
    right = official_letter(cold_a.output_text or "") == row.answers[0]
    empty = not (got[(row.id, "cold")].output_text or "") or not (cold_a.output_text or "")
    assert v2["lbeval"]["overall"] == (100.0 if right and not empty else 0.0)
    MEASURED["cot prompt tokens (reasoning, answer)"] = (
        got[(row.id, "cold")].usage.prompt_tokens, cold_a.usage.prompt_tokens,
    )  # fmt: skip
    print("\nLongBench v2 real-server measurements:", json.dumps(MEASURED, indent=1))
