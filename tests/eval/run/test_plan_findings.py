"""The default plan (records/scenarios.DEFAULT_PLAN) and the run's messages that say what was found: a salt that
does not isolate (probe.SALT_FAULT), a short hit ("found N of M cached tokens"), on the fake server."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from eval.analyze.attribution import POINT_PARTIAL, pointed_cause
from eval.analyze.score import score_run
from eval.cli import main as cli_main
from eval.commands import run as run_command
from eval.errors import ConfigError
from eval.records.final import select_final
from eval.records.run_folder import load_run, read_manifest
from eval.records.scenarios import DEFAULT_PLAN
from eval.records.types import RequestRecord
from eval.report.attribution import reading
from eval.run.client import Client
from eval.run.probe import SALT_FAULT, probe_server
from eval.run.request import RequestSettings
from eval.run.retry import RetryPolicy
from eval.run.runner import execute_run
from eval.run.scenarios.hitlen import hit_lengths
from eval.run.scenarios.settings import ScenarioSettings, sized_default_plan
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer, Fault, PrefixEffect

FAST = RetryPolicy(retries=2, backoff_s=0.01, max_backoff_s=0.02)
BLOCK = 16
# make_row(i, words=w) in chat: 2 + w + 2 + 4 + 2 + 1 words, and the fake's chat template adds 3 + 5 tokens
CHAT_TOKENS_60 = 2 + 60 + 2 + 4 + 2 + 1 + 3 + 5  # 79: 4 full blocks usable (64 tokens)


def default_plan(argv: list[str] | None = None) -> ScenarioSettings:
    p = argparse.ArgumentParser()
    run_command.configure(p)
    return run_command.scenario_config(p.parse_args(["--variant", "v", "--inputs", "i", *(argv or [])]), {})


def rows_file(tmp_path: Path, n: int = 4) -> Path:
    datasets = ("qasper", "gov_report")
    rows = [make_row(i, dataset=datasets[i % 2]) for i in range(n)]
    return write_rows(tmp_path / "inputs.jsonl", rows)


def probe(server: FakeServer, cold_mode: str = "auto") -> Any:
    with Client(server.base_url, timeout_s=10) as client:
        return probe_server(
            client, model=None, settings=RequestSettings(), modes={"chat"}, cold_mode=cold_mode, policy=FAST
        )


# --- the default plan --------------------------------------------------------------------------------------------


def test_no_scenario_option_gives_the_default_plan_and_scenarios_cache_the_cache_passes_alone() -> None:
    s = default_plan()
    assert s.default_plan and s.scenarios == ("cache", "batch", "hitlen", "repeats", "traffic", "replicas")
    assert (s.inputs, s.batch_sizes, s.repeats, s.max_tokens) == (
        None,
        (1, 2),
        2,
        16,
    )  # inputs: from the run's
    sized = [sized_default_plan(s, n).inputs for n in (1, 4, 12, 23, 24, 32, 100)]
    assert sized == [1, 1, 1, 1, 2, 2, 8]  # one per 12 inputs, at least 1
    assert s.hit_classes == ("1B", "middle", "deepest partial", "last block") and s.hit_lengths is None
    cache = default_plan(["--scenarios", "cache"])
    assert cache.scenarios == ("cache",) and not cache.default_plan
    named = default_plan(["--scenarios", "cache,hitlen"])  # named scenarios keep their own defaults
    assert (named.inputs, named.hit_classes, named.batch_sizes, named.repeats) == (None, None, (1, 4, 8), 10)
    assert default_plan(["--max-tokens", "8"]).max_tokens == 8  # 16, capped by a smoke run's limit
    assert default_plan(["--max-tokens", "64"]).max_tokens == 16
    given = default_plan(
        ["--scenario-inputs", "3", "--hit-lengths", "5"]
    )  # an option: the rest from the plan
    assert (
        given.default_plan and given.inputs == 3 and given.hit_lengths == (5,) and given.hit_classes is None
    )


def test_the_default_plans_hit_classes_keep_partial_hits_at_three_depths_and_a_full_hit() -> None:
    classes = DEFAULT_PLAN.hit_classes
    # 958 tokens, block 128: 7 full blocks a whole prompt can hit (957 // 128). 1B = 128, middle = 7 // 2 = 3
    # blocks (384, also 3B: named by the plan's class), deepest partial = 6 blocks (768), last block = 896 (full)
    assert hit_lengths(958, 128, classes=classes) == [
        (128, "1B"),
        (384, "middle"),
        (768, "deepest partial"),
        (896, "last block"),
    ]
    # 1,103 tokens (the first mini Qasper input): 8 full blocks; middle 4 blocks, deepest partial 7
    assert [length for length, _ in hit_lengths(1103, 128, classes=classes)] == [128, 512, 896, 1024]
    # 300 tokens: 2 full blocks; middle and deepest partial are both 1 block: 1B, planned once; the full hit
    # (256, also 2B) named by the plan's class
    assert hit_lengths(300, 128, classes=classes) == [(128, "1B"), (256, "last block")]
    assert hit_lengths(300, 128, classes=("1B", "last block")) == [(128, "1B"), (256, "last block")]
    # 200 tokens: 1 full block, the full hit; no partial depth (0 blocks gives no length)
    assert hit_lengths(200, 128, classes=classes) == [(128, "1B")]
    # 100 tokens: no block below n-1, no rule gives a length
    assert hit_lengths(100, 128, classes=classes) == []


def test_a_default_plan_run_sends_every_scenario_on_one_input_of_four(tmp_path: Path) -> None:
    with FakeServer(block_size=BLOCK) as server:
        run_dir = execute_run(
            config_for(server, rows_file(tmp_path), tmp_path / "runs", scenarios=default_plan())
        )
    loaded = load_run(run_dir)
    m = loaded.manifest
    assert m.complete
    assert m.settings.scenarios == ["cache", "batch", "hitlen", "repeats", "traffic", "replicas"]
    assert (
        m.settings.hit_classes == ["1B", "middle", "deepest partial", "last block"]
        and m.settings.scenario_inputs == 1
    )
    finals = select_final(loaded.records).final.values()
    per_scenario: dict[str, set[str]] = {}
    for r in finals:
        per_scenario.setdefault(r.scenario, set()).add(r.example_id)
    assert per_scenario["cache"] == {"ex0", "ex1", "ex2", "ex3"}
    for name in ("batch", "hitlen", "repeats", "traffic"):
        assert per_scenario[name] == {"ex0"}, name  # the first input (round robin over the datasets)
    assert "replicas" not in per_scenario  # one server: the replicas scenario plans nothing
    full = sorted(r.variation["hit_len"] for r in finals if r.pass_name == "hitlen_full")
    # 79 tokens, block 16: 4 full blocks (78 // 16); 1B, middle (2 blocks), deepest partial (3), the last block
    assert full == [16, 32, 48, 64]
    assert all(
        r.settings["max_tokens"] == 16 for r in finals if r.pass_name in ("hitlen_full", "batch_member")
    )


def test_resuming_a_cache_only_run_with_the_default_plan_names_the_difference(tmp_path: Path) -> None:
    inputs = rows_file(tmp_path, 2)
    with FakeServer(block_size=BLOCK) as server:
        run_dir = execute_run(config_for(server, inputs, tmp_path / "runs"))  # cache only, as runs were
        assert read_manifest(run_dir).complete
        with pytest.raises(ConfigError) as err:
            execute_run(config_for(server, inputs, tmp_path / "runs", scenarios=default_plan()))
        assert "scenarios None -> ['cache', 'batch', 'hitlen', 'repeats', 'traffic', 'replicas']" in str(
            err.value
        )
        assert "add --scenarios cache to resume it" in str(err.value)
        again = execute_run(
            config_for(server, inputs, tmp_path / "runs", scenarios=default_plan(["--scenarios", "cache"]))
        )
        assert again == run_dir and read_manifest(run_dir).complete  # --scenarios cache: the same run


def test_the_default_plan_keeps_the_cache_passes_alone_when_cold_requests_reset(tmp_path: Path) -> None:
    with FakeServer(block_size=BLOCK) as server:
        run_dir = execute_run(
            config_for(
                server, rows_file(tmp_path, 2), tmp_path / "runs", cold_mode="reset", scenarios=default_plan()
            )
        )
    m = read_manifest(run_dir)
    assert m.complete and m.settings.scenarios is None  # the cache-only plan's settings
    assert any("need cold requests by cache_salt" in w and "--cold reset" in w for w in m.warnings)


# --- a salt that does not isolate: a finding ---------------------------------------------------------------------


def test_a_salt_that_hits_is_a_cache_isolation_fault_and_auto_goes_on_with_the_reset() -> None:
    with FakeServer(honor_salt=False) as server:
        res = probe(server)
        res.require()  # not refused: the run goes on with the cache reset
    assert res.salt_honored is False and res.cold_mode == "reset" and res.reset_prefix_cache is True
    assert res.findings and res.findings[0].startswith(SALT_FAULT)
    assert any(w.startswith(SALT_FAULT) and "--cold reset" in w for w in res.warnings)
    cap = res.to_dict()["capabilities"]["cache_salt"]
    assert cap["fault"] is True and cap["required"] is False and "not honoured" in cap["detail"]


def test_a_salt_that_hits_refuses_explicit_salt_cold_passes_naming_the_fault() -> None:
    with FakeServer(honor_salt=False) as server:
        res = probe(server, cold_mode="salt")
    with pytest.raises(ConfigError) as err:
        res.require()
    assert "cache_salt accepted but not honoured: a cache isolation fault" in str(err.value)
    assert "lacks" not in str(err.value)  # not a missing capability


def test_a_salt_that_hits_without_a_reset_to_fall_back_on_is_refused_naming_the_fault() -> None:
    with FakeServer(honor_salt=False, reset_enabled=False) as server:
        res = probe(server)
    with pytest.raises(ConfigError, match="not honoured: a cache isolation fault"):
        res.require()


def test_a_run_on_a_leaking_salt_completes_with_the_finding_and_salted_records_that_hit(
    tmp_path: Path,
) -> None:
    with FakeServer(block_size=BLOCK, honor_salt=False) as server:
        run_dir = execute_run(
            config_for(
                server, rows_file(tmp_path, 2), tmp_path / "runs", cold_mode="auto", scenarios=default_plan()
            )
        )
    loaded = load_run(run_dir)
    m = loaded.manifest
    assert m.settings.cold_mode == "reset" and m.probe.findings[0].startswith(SALT_FAULT)
    assert any(w.startswith(SALT_FAULT) for w in m.warnings)
    salted: list[RequestRecord] = [r for r in loaded.records if r.pass_name == "control_salt"]
    # what the gate's cache_isolation rule reads: a salted request that reports cached tokens
    assert salted and all(r.cache_salt and (r.usage.cached_tokens or 0) > 0 for r in salted)
    assert all(r.status == "invalid" for r in salted)


def test_explicit_scenarios_on_a_leaking_salt_are_refused_naming_the_fault(tmp_path: Path) -> None:
    with FakeServer(block_size=BLOCK, honor_salt=False) as server, pytest.raises(ConfigError) as err:
        execute_run(
            config_for(
                server, rows_file(tmp_path, 2), tmp_path / "runs", cold_mode="auto",
                scenarios=default_plan(["--scenarios", "cache,hitlen"]),
            )
        )  # fmt: skip
    assert SALT_FAULT in str(err.value) and "needs --cold salt" in str(err.value)


# --- a short hit: found N of M -----------------------------------------------------------------------------------


def test_a_short_hit_is_found_n_of_m_and_not_retried(tmp_path: Path) -> None:
    with FakeServer(block_size=BLOCK) as server:
        server.add_fault(Fault("short_hit", salt_seen=1, times=-1))  # every warm: one block short
        run_dir = execute_run(config_for(server, rows_file(tmp_path, 2), tmp_path / "runs"))
    loaded = load_run(run_dir)
    warm = [r for r in loaded.records if r.pass_name == "warm"]
    assert len(warm) == 2  # one record per input: no retry
    expected = (CHAT_TOKENS_60 - 1) // BLOCK * BLOCK
    for r in warm:
        assert r.status == "invalid" and r.attempt == 0
        assert r.usage.cached_tokens == expected - BLOCK and r.expected_cached_tokens == expected
        assert r.error == f"found {expected - BLOCK} of {expected} cached tokens (hit): a short hit"
    m = loaded.manifest
    assert m.complete
    assert any("found 48 of 64" in w and "short hits, kept invalid, not retried" in w for w in m.warnings)
    assert not any("missed the prefix cache" in w for w in m.warnings)


def test_a_miss_is_still_retried(tmp_path: Path) -> None:
    with FakeServer(block_size=BLOCK) as server:
        server.add_fault(Fault("warm_miss", match="Example ex0", salt_seen=1, times=1))
        run_dir = execute_run(config_for(server, rows_file(tmp_path, 2), tmp_path / "runs"))
    loaded = load_run(run_dir)
    warm = [r for r in loaded.records if r.pass_name == "warm"]
    assert len(warm) == 3 and sum(r.status == "ok" for r in warm) == 2  # the miss was retried and recovered
    assert any("missed the prefix cache" in w for w in loaded.manifest.warnings)


# --- the attribution reading points at the cause -----------------------------------------------------------------


def test_the_default_plan_catches_partial_prefix_numerics_and_the_reading_names_them(tmp_path: Path) -> None:
    """The fake's prefix effect with modulus 64, residue 16: a request whose longest earlier same-salt prompt
    is a proper prefix of 16 tokens (mod 64) diverges. In the default plan only hitlen's 1B hit (L = 16 of a
    79-token prompt: a partial prefix) is one; its middle and deepest partial hits (32, 48), its last-block hit
    (64: the full blocks) and every warm request of the other scenarios (same prompt, not a proper prefix) are
    untouched."""
    with FakeServer(block_size=BLOCK) as server:
        server.prefix_effect = PrefixEffect(modulus=64, residue=16)
        run_dir = execute_run(
            config_for(server, rows_file(tmp_path), tmp_path / "runs", scenarios=default_plan())
        )
    a = score_run(run_dir).scores.attribution
    assert a is not None
    p = pointed_cause(a)
    assert p.kind == POINT_PARTIAL and [r.key for r in p.differing] == ["hitlen"]
    assert [(r.value, r.partial) for r in p.sub_rows] == [("1B", True)]
    assert reading(a).endswith(
        "Points at: differences only where a partial prefix was resumed: hitlen 3/4 (1B 0/1); "
        "cache, batch, repeats, traffic clean."
    )


def test_a_salt_that_hits_is_a_finding_with_an_explicit_cold_reset_too() -> None:
    with FakeServer(honor_salt=False) as server:
        res = probe(server, cold_mode="reset")
        res.require()
    assert res.cold_mode == "reset" and res.findings and res.findings[0].startswith(SALT_FAULT)
    assert res.capabilities["cache_salt"].fault and not res.capabilities["cache_salt"].required


def test_lbeval_ab_without_scenario_options_runs_the_default_plan_on_both_sides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = rows_file(tmp_path, 2)
    with FakeServer(block_size=BLOCK) as s:
        code = cli_main(
            ["ab", "x", "y", "--inputs", str(inputs), "--base-url-a", s.base_url, "--base-url-b", s.base_url,
             "--out", str(tmp_path / "runs"), "--timing-reps", "1", "--seed", "3"]
        )  # fmt: skip
    assert code == 0
    for line in capsys.readouterr().out.split():
        m = read_manifest(Path(line))
        assert m.complete and m.settings.scenarios == [
            "cache",
            "batch",
            "hitlen",
            "repeats",
            "traffic",
            "replicas",
        ]
        assert (
            m.settings.hit_classes == ["1B", "middle", "deepest partial", "last block"]
            and m.settings.repeats == 2
        )
