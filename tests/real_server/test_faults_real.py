"""Two fault variants of the real vLLM CPU server (lbeval's plugin, eval/serve/faults/; docs/faults.md), each
run through lbeval against a clean cpu-smollm2 run with the same plan: the fault shows on its own row of the
comparison's attribution table, the other rows stay clean, and the shipped default gate FAILS naming the rule
and row of the cause.

- partial_prefix: logits perturbed only when a request resumes from a partial prefix hit. The cold/warm row (a
  full-block hit) stays equal; the hitlen row of the partial lengths differs.
- short_hits: hits of 2+ blocks come back one block short. Output tokens stay equal (the KV is recomputed, not
  wrong); the records show the promised cached tokens missing by one block (warm and hitlen_full).

Each side starts its own server (`lbeval run --spec`), one at a time; 2 mini inputs, 8 output tokens, hit
lengths 200 and 640 (partial: 1 and 5 of the prompt's 7-8 full blocks) and 1050 (every full block of the Qasper
input). `make server-faults` installs the plugin first (instant when its stamp holds).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval.cli import main
from eval.records.final import select_final
from eval.records.run_folder import load_run
from tests.real_server.mini import prepare_mini
from tests.server_switch import make

pytestmark = pytest.mark.real_server

PLAN = ["--max-tokens", "8", "--passes", "cold,warm", "--scenarios", "cache,hitlen", "--scenario-inputs", "1"]
PLAN += ["--hit-lengths", "200,640,1050", "--quiet"]


def lbeval(*argv: str) -> int:
    return main(list(argv))


@pytest.fixture(scope="module")
def fault_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    make("server-venv", "server-model", "server-faults")
    work = tmp_path_factory.mktemp("faults")
    prepare_mini(work / "inputs.jsonl")
    run_variant(work, "cpu-smollm2", "cpu-smollm2")
    return work


def run_variant(work: Path, variant: str, spec: str) -> Path:
    argv = ["run", "--variant", variant, "--spec", spec, "--inputs", str(work / "inputs.jsonl")]
    assert lbeval(*argv, "--out", str(work / "runs"), "--run-id", "r", *PLAN) == 0
    return work / "runs" / variant / "r"


def summary(work: Path, variant: str) -> dict[str, Any]:
    """The comparison's summary.json (its verdict is the shipped default policy's, as `lbeval gate` gives it)."""
    out = work / "compare" / variant
    base = work / "runs" / "cpu-smollm2" / "r"
    assert lbeval("compare", str(base), str(work / "runs" / variant / "r"), "--out", str(out)) in (0, 1, 2)
    data: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return data


def attribution(work: Path, variant: str) -> dict[str, dict[str, Any]]:
    """The comparison's attribution rows by key: {key: {column: cell}}."""
    return {row["key"]: row["cells"] for row in summary(work, variant)["tables"]["attribution"]["rows"]}


def failed_rules(work: Path, variant: str) -> dict[str, set[str]]:
    """The default gate on base vs `variant`: exit 1 (FAIL), and {failing rule: the rows it fails on}."""
    base = work / "runs" / "cpu-smollm2" / "r"
    assert lbeval("gate", str(base), str(work / "runs" / variant / "r")) == 1
    verdict = summary(work, variant)["verdict"]
    assert verdict["outcome"] == "FAIL", verdict["summary"]
    return {
        r["rule"]: {ref["row"] for ref in r.get("rows") or [] if ref.get("failed")}
        for r in verdict["results"]
        if r["status"] == "fail"
    }


def test_partial_prefix_shows_on_the_hitlen_rows_only(fault_work: Path) -> None:
    variant = "cpu-smollm2-fault-partial-prefix"
    run_variant(fault_work, variant, variant)
    run = load_run(fault_work / "runs" / variant / "r")
    finals = list(select_final(run.records).final.values())
    by_pass: dict[str, list[Any]] = {}
    for rec in finals:
        by_pass.setdefault(rec.pass_name, []).append(rec)
    base = base_finals(fault_work)
    # cold/warm (a full hit) equal to the clean run, token for token and logprob for logprob
    assert by_pass["warm"] and not any(differs(r, base) for r in by_pass["warm"] + by_pass["cold"])
    # hitlen_full after a partial prime differs from the clean run; after the full prime it does not
    hits = [(r, r.usage.cached_tokens or 0) for r in by_pass["hitlen_full"]]
    partial = [r for r, c in hits if 0 < c < full(r)]
    whole = [r for r, c in hits if c and c == full(r)]
    assert partial and whole, [(r.variation, c) for r, c in hits]
    assert all(differs(r, base) for r in partial)
    assert not any(differs(r, base) for r in whole)
    # the comparison's attribution table points at the partial lengths: far above the base there, clean elsewhere
    rows = attribution(fault_work, variant)
    for key in ("hitlen_L_200", "hitlen_L_640"):
        assert delta(rows[key], "variant") > max(0.05, 100 * delta(rows[key], "base")), (key, rows[key])
    for key in ("hitlen_L_1050", "cache_cold_warm"):
        assert delta(rows[key], "variant") <= 10 * delta(rows[key], "base") + 1e-4, (key, rows[key])
    # and the shipped default gate FAILS on the row of its cause, the partial hit lengths, and nowhere else
    failed = failed_rules(fault_work, variant)
    assert set(failed) == {"cause_rows"}, failed
    assert {"hitlen_L_200", "hitlen_L_640"} <= failed["cause_rows"], failed
    assert not failed["cause_rows"] & {"hitlen_L_1050", "cache_cold_warm"}, failed


def test_short_hits_shows_one_block_missing_and_outputs_equal(fault_work: Path) -> None:
    variant = "cpu-smollm2-fault-short-hits"
    run_variant(fault_work, variant, variant)
    run = load_run(fault_work / "runs" / variant / "r")
    base = base_finals(fault_work)
    finals = list(select_final(run.records).final.values())
    warm = [r for r in finals if r.pass_name == "warm"]
    found = [(r.usage.cached_tokens, full(r)) for r in warm]
    assert warm and all(c == f - 128 for c, f in found), found
    # the recomputed block gives the same tokens as the clean run; the logprobs move only at the level a different
    # hit length moves them on this backend (measured ~3e-5; a numerics fault moves them by ~0.9)
    for rec in finals:
        twin = base[slot(rec)]
        assert rec.output_token_ids == twin.output_token_ids and max_delta(rec, twin) < 1e-3, rec.pass_name
    primed = [r for r in finals if r.pass_name == "hitlen_full" and r.expected_cached_tokens]
    short = [r for r in primed if r.expected_cached_tokens >= 256]
    assert short and all(r.usage.cached_tokens == r.expected_cached_tokens - 128 for r in short)
    # the attribution table: every hitlen row's outputs equal the base's, the primed hits of 2+ blocks not honoured
    rows = attribution(fault_work, variant)
    honoured = rows["hitlen"]["variant primed hits honoured"]
    assert honoured == {"k": 1, "n": 3} and rows["hitlen"]["base primed hits honoured"] == {"k": 3, "n": 3}
    # the shipped default gate FAILS on the promised hits (every warm pair is invalid: FAIL, not no verdict)
    # and on those rows only: the promised hits (hitlen), the invalid warm attempts, and the rows that read the
    # invalid warm records (cold/warm); never a hitlen length row, whose outputs equal the base's
    failed = failed_rules(fault_work, variant)
    assert failed == {
        "hitlen_cache_honoured": {"hitlen"},
        "no_invalid_warm": {"invalid_warm_attempts"},
        "cold_warm_equality": {"cold_warm_text"},
        "cause_rows": {"cache_cold_warm"},
    }, failed


def delta(cells: dict[str, Any], side: str) -> float:
    return float(cells[f"{side} max |top-k logprob delta|"])


def slot(rec: Any) -> tuple[str, str, str]:
    return rec.pass_name, rec.example_id, json.dumps(rec.variation, sort_keys=True)


def base_finals(work: Path) -> dict[tuple[str, str, str], Any]:
    run = load_run(work / "runs" / "cpu-smollm2" / "r")
    return {slot(r): r for r in select_final(run.records).final.values()}


def full(rec: Any) -> int:
    """What a full hit covers: whole blocks of 128, never the last prompt token."""
    return int((rec.usage.prompt_tokens - 1) // 128 * 128)


def max_delta(a: Any, b: Any) -> float:
    rows = zip(a.topk.logprobs, b.topk.logprobs, strict=True)
    return max((abs(x - y) for ra, rb in rows for x, y in zip(ra, rb, strict=True)), default=0.0)


def differs(rec: Any, base: dict[tuple[str, str, str], Any]) -> bool:
    twin = base[slot(rec)]
    return bool(rec.output_token_ids != twin.output_token_ids or rec.topk != twin.topk)
