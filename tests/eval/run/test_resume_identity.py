"""A run is measured on one server and an `lbeval ab` session has one pair of sides and one seed: a resume that
would mix another server, swapped sides or another seed into the run folders is refused with one line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from eval.cli import main
from eval.errors import EXIT_CONFIG, ConfigError
from eval.records.cache_model import CacheModel
from eval.records.manifest_parts import ProbeFacts
from eval.records.run_folder import MANIFEST_NAME, PAIRS_NAME, RECORDS_NAME, read_manifest
from eval.records.server_identity import SERVER_IDENTITY_KEYS, server_differences
from eval.records.types import RequestRecord
from eval.run.ab import AbConfig, execute_ab
from eval.run.config import endpoints
from eval.run.runner import RunConfig, execute_run
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer


class _Stop(Exception):
    pass


def _interrupted_run(tmp_path: Path, server: FakeServer) -> Path:
    """A cache-only run on `server` stopped after its first records (resumable)."""
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(3)])
    config = config_for(server, inputs, tmp_path / "runs", passes=("cold", "warm"))
    seen: list[RequestRecord] = []

    def stop_after_two(rec: RequestRecord) -> None:
        seen.append(rec)
        if len(seen) == 2:
            raise _Stop

    with pytest.raises(_Stop):
        execute_run(config, on_record=stop_after_two)
    return inputs


def _run_cli(inputs: Path, tmp_path: Path, url: str) -> int:
    return main(
        ["run", "--variant", "v1", "--inputs", str(inputs), "--base-url", url, "--out", str(tmp_path / "runs"),
         "--passes", "cold,warm", "--scenarios", "cache", "--quiet", "--retries", "1", "--backoff", "0.01"]
    )  # fmt: skip


def test_a_resume_against_a_server_of_another_version_and_block_size_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeServer() as first:
        inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(3)])
        assert _run_cli(inputs, tmp_path, first.base_url) == 0
    run_dir = Path(capsys.readouterr().out.split()[-1])
    manifest = (run_dir / MANIFEST_NAME).read_bytes()
    records = (run_dir / RECORDS_NAME).read_bytes()
    with FakeServer(version="0.0.1+other", block_size=32) as other:
        assert _run_cli(inputs, tmp_path, other.base_url) == EXIT_CONFIG
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "version '0.0.0+fake' -> '0.0.1+other'" in err[0] and "block_size 16 -> 32" in err[0]
    assert str(run_dir) in err[0] and "--run-id" in err[0]
    # the run folder is as the first session left it: its probe not overwritten, nothing appended
    assert (run_dir / MANIFEST_NAME).read_bytes() == manifest
    assert (run_dir / RECORDS_NAME).read_bytes() == records
    assert read_manifest(run_dir).probe.version == "0.0.0+fake"


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"max_model_len": 999}, "max_model_len"),
        ({"prefix_caching": False}, "prefix_caching True -> False"),
        ({"dialect": "sglang"}, "server_kind 'vllm' -> 'sglang'"),
    ],
)
def test_an_interrupted_run_resumed_against_another_server_is_refused(
    tmp_path: Path, changed: dict[str, object], named: str
) -> None:
    with FakeServer() as first:
        inputs = _interrupted_run(tmp_path, first)
    with FakeServer(**changed) as other:  # type: ignore[arg-type]
        config = config_for(other, inputs, tmp_path / "runs", passes=("cold", "warm"), model=None)
        with pytest.raises(ConfigError, match="measured on another server") as caught:
            execute_run(config)
    assert named in str(caught.value)
    # the same server kind and build again resumes and completes
    with FakeServer() as again:
        run_dir = execute_run(config_for(again, inputs, tmp_path / "runs", passes=("cold", "warm")))
    assert read_manifest(run_dir).complete


def test_server_differences_compare_the_cache_model_only_when_both_probes_have_one() -> None:
    probe = ProbeFacts(**{key: f"v-{key}" for key in SERVER_IDENTITY_KEYS})  # type: ignore[arg-type]
    assert server_differences(probe, replace(probe)) == []
    assert server_differences(probe, replace(probe, block_size=32)) == [("block_size", "v-block_size", 32)]
    with_model = replace(probe, cache_model=CacheModel(kind="blocks", block_size=16, evidence="saw 16"))
    assert server_differences(probe, with_model) == []  # an earlier probe without one: nothing to compare
    seen_otherwise = replace(probe, cache_model=CacheModel(kind="blocks", block_size=16, evidence="saw 32"))
    assert server_differences(with_model, seen_otherwise) == []  # how the probe saw it names no other server
    other = replace(probe, cache_model=CacheModel(kind="checkpoints", block_size=16, evidence="saw 16"))
    assert server_differences(with_model, other) == [
        ("cache_model", {"kind": "blocks", "block_size": 16}, {"kind": "checkpoints", "block_size": 16})
    ]


def _ab_config(
    tmp_path: Path, url_a: str, url_b: str, a: str = "base", b: str = "var", seed: int = 7
) -> AbConfig:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(3)])
    ca = config_for_url(url_a, inputs, tmp_path / "runs", variant=a, passes=("cold", "warm", "timing"))
    return AbConfig(ca, replace(ca, variant=b, topology=endpoints(url_b)), seed=seed)


def config_for_url(url: str, inputs: Path, out: Path, **kw: object) -> RunConfig:
    with FakeServer() as placeholder:
        config = config_for(placeholder, inputs, out, **kw)  # type: ignore[arg-type]
    return replace(config, topology=endpoints(url))


def _interrupt_after(n: int) -> Callable[[str, tuple[int, str, int]], None]:
    calls: list[str] = []

    def between(side: str, unit: tuple[int, str, int]) -> None:
        calls.append(side)
        if len(calls) == n:
            raise KeyboardInterrupt

    return between


def _pairs_bytes(tmp_path: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted((tmp_path / "runs").rglob(PAIRS_NAME))}


def test_ab_resumed_with_another_seed_is_refused(tmp_path: Path) -> None:
    with FakeServer() as a, FakeServer() as b:
        config = _ab_config(tmp_path, a.base_url, b.base_url, seed=7)
        with pytest.raises(KeyboardInterrupt):
            execute_ab(config, between=_interrupt_after(4))
        before = _pairs_bytes(tmp_path)
        records = {p: p.read_bytes() for p in (tmp_path / "runs").rglob(RECORDS_NAME)}
        with pytest.raises(ConfigError, match=r"--seed 7, now 8") as caught:
            execute_ab(replace(config, seed=8))
        assert "--run-id" in str(caught.value) and "\n" not in str(caught.value)
        assert _pairs_bytes(tmp_path) == before and before
        assert {p: p.read_bytes() for p in (tmp_path / "runs").rglob(RECORDS_NAME)} == records  # none sent
        da, db = execute_ab(config)  # the original seed resumes
    assert read_manifest(da).complete and read_manifest(db).complete
    assert [s.ab.seed for s in read_manifest(da).sessions if s.ab is not None] == [7, 7]


def test_ab_resumed_with_the_sides_swapped_is_refused(tmp_path: Path) -> None:
    """base vs var stopped before its first pair line, then var vs base: each run would change sides."""
    with FakeServer() as a, FakeServer() as b:
        config = _ab_config(tmp_path, a.base_url, b.base_url)
        with pytest.raises(KeyboardInterrupt):
            execute_ab(config, between=_interrupt_after(1))
        assert not _pairs_bytes(tmp_path) or not any(_pairs_bytes(tmp_path).values())
        swapped = AbConfig(config.b, config.a, seed=config.seed)
        with pytest.raises(ConfigError, match=r"var/ab-\w+ was side b, now side a") as caught:
            execute_ab(swapped)
    assert "base/" in str(caught.value) and "was side a, now side b" in str(caught.value)


def test_aa_resumed_with_the_servers_swapped_is_refused(tmp_path: Path) -> None:
    """lbeval ab x x on two servers, resumed with --base-url-a and --base-url-b given the other way round."""
    with FakeServer() as a, FakeServer() as b:
        config = _ab_config(tmp_path, a.base_url, b.base_url, a="x", b="x")
        with pytest.raises(KeyboardInterrupt):
            execute_ab(config, between=_interrupt_after(4))
        swapped = replace(
            config,
            a=replace(config.a, topology=endpoints(b.base_url)),
            b=replace(config.b, topology=endpoints(a.base_url)),
        )
        with pytest.raises(ConfigError, match="side A's server is side B's of the last session"):
            execute_ab(swapped)
        da, db = execute_ab(config)
    assert read_manifest(da).complete and read_manifest(db).complete
