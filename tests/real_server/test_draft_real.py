"""Speculative decoding on the real engine (`cpu-smollm2-draft`: cpu-smollm2 verifying 3 tokens a step drafted
by its own first 4 layers; `make server-draft`): lbeval reads vLLM's spec_decode counters per request into the
run's figures, the run's drafts are the counters' movement over its requests, some drafts are accepted, and the
prefix cache and the outputs behave as on the dense server (cold, warm and repeat equal, full-block hits)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.analyze.score import score_run
from eval.cli import main
from eval.records.final import select_final
from eval.records.run_folder import load_run
from eval.serve.launch_specs import get_launch_spec
from eval.serve.process import start
from tests.real_server.mini import prepare_mini
from tests.server_switch import make

pytestmark = pytest.mark.real_server


def lbeval(*argv: str) -> int:
    return main(list(argv))


@pytest.fixture(scope="module")
def draft_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    make("server-venv", "server-model", "server-draft")
    work = tmp_path_factory.mktemp("draft")
    prepare_mini(work / "in.jsonl")
    server = start(get_launch_spec("cpu-smollm2-draft"), log=work / "server.log")
    try:
        argv = ["run", "--variant", "draft", "--inputs", str(work / "in.jsonl"), "--out", str(work / "runs")]
        argv += ["--run-id", "r", "--base-url", server.base_url, "--max-tokens", "32"]
        assert lbeval(*argv, "--passes", "cold,warm,repeat", "--scenarios", "cache", "--quiet") == 0
    finally:
        server.stop()
    return work / "runs" / "draft" / "r"


def test_the_run_reports_its_drafts_and_acceptance(draft_run: Path) -> None:
    got = score_run(draft_run).scores.spec_decode
    finals = list(select_final(load_run(draft_run).records).final.values())
    assert got is not None and got.counted == len(finals) == 6 and got.foreign == 0
    assert got.drafts > 0 and got.draft_tokens == 3 * got.drafts  # 3 speculative tokens a step
    assert 0 < got.accepted == sum(got.accepted_per_position) and len(got.accepted_per_position) == 3
    # summed by hand from the records' own figures
    assert got.drafts == round(sum((r.server_metrics or {}).get("spec_drafts", 0) for r in finals))


def test_the_cache_and_outputs_behave_as_on_the_dense_server(draft_run: Path) -> None:
    finals = list(select_final(load_run(draft_run).records).final.values())
    assert all(r.status == "ok" for r in finals), [(r.pass_name, r.error) for r in finals]
    by: dict[tuple[str, str], list[int]] = {
        (r.example_id, r.pass_name): r.output_token_ids or [] for r in finals
    }
    for example in {r.example_id for r in finals}:
        assert by[(example, "cold")] == by[(example, "warm")] == by[(example, "repeat")], example
    for r in finals:
        if r.pass_name != "cold":
            n = r.usage.prompt_tokens
            assert n is not None and r.usage.cached_tokens == (n - 1) // 128 * 128  # no block dropped
