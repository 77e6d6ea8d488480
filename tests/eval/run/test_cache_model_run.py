"""The probe's cache model and a whole run on a server whose cache keeps recurrent-state checkpoints (the fake's
`cache_checkpoints`, the rule measured on the real hybrid engine: docs/servers/hybrid.md): every expectation
reads the model, so a correct hybrid server gives 0 invalid requests and the hitlen rows measure partial hits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import eval.run.probe as probe_module
from eval.analyze.score import score_run
from eval.cli import main as cli_main
from eval.errors import DataError
from eval.records.cache_model import BLOCKS, CHECKPOINTS, CacheModel
from eval.records.final import select_final
from eval.records.run_folder import MANIFEST_NAME, load_run
from eval.records.types import RequestRecord
from eval.run.client import Client
from eval.run.probe import ProbeResult, probe_server
from eval.run.request import RequestSettings
from eval.run.runner import execute_run
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer, Fault

BLOCK = 16


@pytest.fixture(name="hybrid")
def hybrid_fixture() -> Iterator[FakeServer]:
    with FakeServer(cache_checkpoints=True, block_size=BLOCK) as server:
        yield server


def probe_of(server: FakeServer) -> ProbeResult:
    client = Client(server.base_url, timeout_s=10.0)
    try:
        return probe_server(client, model=None, settings=RequestSettings(), modes={"chat"})
    finally:
        client.close()


def test_the_probe_measures_each_cache_model(hybrid: FakeServer) -> None:
    got = probe_of(hybrid).cache_model
    assert got is not None and got.kind == CHECKPOINTS and got.block_size == BLOCK and got.source == "probe"
    assert got.evidence.endswith(f"{BLOCK} cached") and f"a prime of {2 * BLOCK} of" in got.evidence
    with FakeServer(block_size=BLOCK) as dense:
        got = probe_of(dense).cache_model
    assert got is not None and got.kind == BLOCKS and got.evidence.endswith(f"{2 * BLOCK} cached")


def test_a_server_without_tokenize_gets_an_assumed_model() -> None:
    with FakeServer(block_size=BLOCK, tokenize_enabled=False) as server:
        got = probe_of(server).cache_model
    assert got == CacheModel(BLOCKS, BLOCK, source="assumed", evidence="not measured: no /tokenize")


def hybrid_run(server: FakeServer, tmp_path: Path) -> list[RequestRecord]:
    rows = [make_row(i, words=90) for i in range(2)]
    inputs = write_rows(tmp_path / "inputs.jsonl", rows)
    plan = ScenarioSettings(scenarios=("cache", "hitlen"), hit_classes=("1B", "2B", "3B+1", "last block"))
    run_dir = execute_run(config_for(server, inputs, tmp_path / "runs", scenarios=plan, timing_reps=1))
    loaded = load_run(run_dir)
    model = loaded.manifest.probe.cache_model
    assert model is not None and model.kind == server_kind(server)
    return list(select_final(loaded.records).final.values())


def server_kind(server: FakeServer) -> str:
    return CHECKPOINTS if server.cache_checkpoints else BLOCKS


def test_a_correct_hybrid_server_gives_no_invalid_request(hybrid: FakeServer, tmp_path: Path) -> None:
    finals = hybrid_run(hybrid, tmp_path)
    assert [f"{r.pass_name} {r.error}" for r in finals if r.status != "ok"] == []
    sibling = [r for r in finals if r.pass_name == "control_sibling"]
    assert len(sibling) == 2 and all(r.usage.cached_tokens == r.expected_cached_tokens for r in sibling)
    assert all((r.expected_cached_tokens or 0) > 0 for r in sibling)
    full = [r for r in finals if r.pass_name == "hitlen_full"]
    assert len(full) == 8
    for r in full:
        length, n = int(r.variation["hit_len"]), r.usage.prompt_tokens
        assert n is not None and r.usage.cached_tokens == min(length, n - 1) // BLOCK * BLOCK
        assert r.variation["prime_len"] == min(length + 1, n)  # the prime that leaves a checkpoint there
    partial = {
        int(r.variation["hit_len"]) for r in full if (r.usage.cached_tokens or 0) < r.variation["full_cached"]
    }
    assert partial >= {BLOCK, 2 * BLOCK, 3 * BLOCK + 1}  # the rows measure partial hits at depth


def test_dense_expectations_on_a_hybrid_server_mark_a_correct_server_invalid(
    hybrid: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the cache model changes: the same run with the probe's model forced to dense blocks (what lbeval
    assumed before it had one) misjudges the same correct server."""

    def dense(res: ProbeResult, hits: tuple[int, int, int], n: int, block: int) -> CacheModel:
        return CacheModel(BLOCKS, block)  # whatever the hits measured

    monkeypatch.setattr(probe_module, "_model_from", dense)
    rows = [make_row(i, words=90) for i in range(2)]
    inputs = write_rows(tmp_path / "inputs.jsonl", rows)
    plan = ScenarioSettings(scenarios=("cache", "hitlen"), hit_classes=("1B", "2B", "3B+1", "last block"))
    run_dir = execute_run(config_for(hybrid, inputs, tmp_path / "runs", scenarios=plan, timing_reps=1))
    finals = list(select_final(load_run(run_dir).records).final.values())
    invalid = {r.pass_name for r in finals if r.status == "invalid"}
    assert "control_sibling" in invalid
    short = [
        r
        for r in finals
        if r.pass_name == "hitlen_full" and r.usage.cached_tokens != r.expected_cached_tokens
    ]
    assert short  # the exact-block primes leave their checkpoint one block lower


def test_dense_server_runs_as_before(tmp_path: Path) -> None:
    with FakeServer(block_size=BLOCK) as dense:
        finals = hybrid_run(dense, tmp_path)
    assert all(r.status == "ok" for r in finals)
    full = [r for r in finals if r.pass_name == "hitlen_full"]
    assert full and all("prime_len" not in r.variation for r in full)


def test_the_report_names_a_checkpointed_cache_and_refuses_a_damaged_model(
    hybrid: FakeServer, tmp_path: Path
) -> None:
    rows = [make_row(0, words=90)]
    inputs = write_rows(tmp_path / "inputs.jsonl", rows)
    run_dir = execute_run(config_for(hybrid, inputs, tmp_path / "runs", passes=("cold", "warm")))
    described = score_run(run_dir).scores.cache_verification
    assert (
        described is not None
        and "prefix cache: recurrent-state checkpoints every 16 tokens" in described.describe()
    )
    manifest = run_dir / MANIFEST_NAME
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["probe"]["cache_model"]["kind"] = "paged"
    manifest.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError, match="probe.cache_model.*kind 'paged'"):
        score_run(run_dir)


@pytest.mark.parametrize(
    ("checkpoints", "stated", "rc", "message"),
    [
        (False, "checkpoints", 78, "states cache_model 'checkpoints', but the server's hits follow 'blocks'"),
        (True, "blocks", 78, "states cache_model 'blocks', but the server's hits follow 'checkpoints'"),
        (True, "paged", 78, "cache_model 'paged' is not one of blocks, checkpoints"),
        (True, "checkpoints", 0, ""),
    ],
)
def test_a_stated_cache_model_is_checked_by_the_probe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], checkpoints: bool, stated: str, rc: int, message: str
) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0, words=90)])
    with FakeServer(cache_checkpoints=checkpoints, block_size=BLOCK) as server:
        specs = tmp_path / "specs.toml"
        specs.write_text(
            f'[variants.stated]\nurl = "{server.base_url}"\ncache_model = "{stated}"\n', encoding="utf-8"
        )
        argv = ["run", "--variant", "v", "--spec", "stated", "--specs", str(specs), "--inputs", str(inputs)]
        got = cli_main([*argv, "--out", str(tmp_path / "runs"), "--passes", "cold,warm", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert got == rc, err
    if message:
        assert len(err) == 1 and message in err[0] and "launch spec stated" in err[0], err


def test_hits_returned_one_block_short_are_no_cache_model() -> None:
    """A dense server whose hits come back one block short (the short_hits fault) hits B after a prime of 2B,
    as checkpoints would; but a whole prompt repeated hits one block short too, which neither kind does: a
    finding, and dense expectations (so the run's warm requests show the lost block as invalid)."""
    with FakeServer(block_size=BLOCK) as server:
        server.add_fault(Fault("short_hit", times=-1))
        res = probe_of(server)
    got = res.cache_model
    assert got is not None and got.kind == BLOCKS and got.source == "assumed", got
    assert any(f.startswith("prefix-cache hits follow no known cache model") for f in res.findings), (
        res.findings
    )
