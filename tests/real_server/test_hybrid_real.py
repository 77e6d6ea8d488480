"""The hybrid server (`cpu-hybrid`: a Qwen3-Next with Gated DeltaNet layers, --mamba-cache-mode align;
docs/servers/hybrid.md) through lbeval: the probe measures its cache model (recurrent-state checkpoints), two
clean default-plan runs have 0 invalid requests, measure partial hits on the hitlen rows and PASS the shipped
default gate against each other; the partial-prefix fault injected into the same server FAILS it on the row of
its cause.

One clean server serves both clean runs (started once here); the fault run starts its own. 2 mini inputs,
16 output tokens, 2 timing repetitions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval.cli import main
from eval.records.cache_model import CHECKPOINTS
from eval.records.final import select_final
from eval.records.run_folder import load_run
from eval.records.types import RequestRecord
from eval.serve.launch_specs import get_launch_spec
from eval.serve.process import start
from tests.real_server.mini import prepare_mini
from tests.server_switch import make

pytestmark = pytest.mark.real_server

PLAN = ["--max-tokens", "16", "--timing-reps", "2", "--quiet"]


def lbeval(*argv: str) -> int:
    return main(list(argv))


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    make("server-venv", "server-model", "server-hybrid", "server-faults")
    work = tmp_path_factory.mktemp("hybrid")
    prepare_mini(work / "inputs.jsonl", model="hybrid-qwen3next-tiny")
    server = start(get_launch_spec("cpu-hybrid"), log=work / "server.log")
    try:
        for variant in ("hybrid-a", "hybrid-b"):
            assert run(work, variant, "--base-url", server.base_url) == 0
    finally:
        server.stop()
    yield work


def run(work: Path, variant: str, *server: str) -> int:
    argv = ["run", "--variant", variant, "--inputs", str(work / "inputs.jsonl"), "--out", str(work / "runs")]
    return lbeval(*argv, "--run-id", "r", *server, *PLAN)


def finals(work: Path, variant: str) -> list[RequestRecord]:
    return list(select_final(load_run(work / "runs" / variant / "r").records).final.values())


def verdict(work: Path, variant: str) -> tuple[int, dict[str, Any]]:
    base, out = work / "runs" / "hybrid-a" / "r", work / "compare" / variant
    rc = lbeval("gate", str(base), str(work / "runs" / variant / "r"))
    assert lbeval("compare", str(base), str(work / "runs" / variant / "r"), "--out", str(out)) in (0, 1, 2)
    data: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return rc, data["verdict"]


def test_the_probe_measures_recurrent_state_checkpoints(work: Path) -> None:
    manifest = load_run(work / "runs" / "hybrid-a" / "r").manifest
    model = manifest.probe.cache_model
    assert model is not None and model.kind == CHECKPOINTS and model.block_size == 128, model
    assert model.evidence.startswith("a prime of 256 of ") and model.evidence.endswith(": 128 cached")


def test_a_correct_hybrid_server_gives_no_invalid_request_and_partial_hits(work: Path) -> None:
    for variant in ("hybrid-a", "hybrid-b"):
        recs = finals(work, variant)
        assert [f"{r.pass_name}: {r.error}" for r in recs if r.status != "ok"] == []
        sibling = [r for r in recs if r.pass_name == "control_sibling"]
        assert sibling and all(r.usage.cached_tokens == r.expected_cached_tokens for r in sibling)
        assert all((r.expected_cached_tokens or 0) > 0 for r in sibling)
        full = [r for r in recs if r.pass_name == "hitlen_full"]
        partial = [r for r in full if 0 < (r.usage.cached_tokens or 0) < int(r.variation["full_cached"])]
        assert partial, [(r.variation, r.usage.cached_tokens) for r in full]
        assert all(r.usage.cached_tokens == r.expected_cached_tokens for r in full)


def test_clean_against_clean_passes_the_shipped_default_gate(work: Path) -> None:
    rc, got = verdict(work, "hybrid-b")
    assert (rc, got["outcome"]) == (0, "PASS"), got["summary"]


def test_the_partial_prefix_fault_fails_on_the_hitlen_row(work: Path) -> None:
    variant = "cpu-hybrid-fault-partial-prefix"
    assert run(work, variant, "--spec", variant) == 0
    rc, got = verdict(work, variant)
    assert (rc, got["outcome"]) == (1, "FAIL"), got["summary"]
    failed = {
        r["rule"]: {ref["row"] for ref in r.get("rows") or [] if ref.get("failed")}
        for r in got["results"]
        if r["status"] == "fail"
    }
    assert "cause_rows" in failed and any(row.startswith("hitlen") for row in failed["cause_rows"]), failed
    assert "cache_cold_warm" not in failed["cause_rows"], failed  # a full hit is not a partial one
