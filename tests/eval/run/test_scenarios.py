"""The scenarios' planning and sending against the fake server: records, cache states, costs, resume, restarts.

Expected counts and cache hits are computed here from the plan's definition (eval/records/scenarios.py) and the
fake's rules (whole blocks of 16 tokens, never the last prompt token), not read from the code under test.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.cli import main as cli_main
from eval.errors import ConfigError
from eval.records.final import select_final, unit_of
from eval.records.run_folder import load_run
from eval.records.server_figures import checked_cached
from eval.records.types import RequestRecord
from eval.run.config import endpoints
from eval.run.runner import RunConfig, execute_run, run_settings
from eval.run.scenarios.base import spread
from eval.run.scenarios.hitlen import hit_lengths
from eval.run.scenarios.repeats import batch_split
from eval.run.scenarios.settings import ScenarioSettings, batched_tokens_budget, parse_ints
from tests.eval.fake_fixtures import config_for, fake_fixture, make_row, write_rows  # noqa: F401 - fixture
from tests.support.fake_server import FakeServer, Fault, PrefixEffect

BLOCK = 16
WORDS = (40, 47, 55)


def n_tokens(words: int) -> int:
    return words + 19  # the fake's chat template (3 + 5 tokens) and make_row's text around the words


def full_blocks(n: int) -> int:
    return (n - 1) // BLOCK * BLOCK


def promised(n: int, length: int) -> int:
    return min(length, n - 1) // BLOCK * BLOCK


def inputs(tmp_path: Path, words: tuple[int, ...] = WORDS) -> Path:
    return write_rows(tmp_path / "inputs.jsonl", [make_row(i, words=w) for i, w in enumerate(words)])


def scenario_run(fake: FakeServer, tmp_path: Path, s: ScenarioSettings, **kw: Any) -> Path:
    config = config_for(fake, kw.pop("inputs", None) or inputs(tmp_path), tmp_path / "runs", **kw)
    return execute_run(replace(config, scenarios=s))


def finals(run_dir: Path) -> list[RequestRecord]:
    return list(select_final(load_run(run_dir).records).final.values())


# ---------------------------------------------------------------- planning


def test_default_hit_lengths_are_the_issues_for_a_958_token_prompt() -> None:
    got = hit_lengths(958, 128)
    assert [length for length, _ in got] == [127, 128, 129, 255, 256, 257, 383, 384, 385, 768, 896, 957]
    assert dict(got)[896] == "last block" and dict(got)[957] == "n-1" and dict(got)[129] == "1B+1"
    # the depths: middle (3 of the 7 full blocks) is 3B's length, named 3B; deepest partial (6 blocks) its own
    assert dict(got)[384] == "3B" and dict(got)[768] == "deepest partial"
    assert dict(hit_lengths(1103, 128))[512] == "middle"  # 8 full blocks: middle 4 blocks, no other rule


def test_the_chunked_prefill_budget_and_its_neighbours_are_hit_lengths() -> None:
    got = dict(hit_lengths(958, 128, budget=512))
    assert (got[511], got[512], got[513]) == ("budget-1", "budget", "budget+1")
    shared = dict(hit_lengths(958, 128, budget=256))
    assert shared[256] == "2B (budget)" and shared[255] == "2B-1 (budget-1)"
    assert [length for length, _ in hit_lengths(100, 128)] == [99]  # n-1 only; no length reaches the prompt
    assert hit_lengths(300, 128, given=[5, 300, 301, 5]) == [(5, "L=5"), (300, "L=300")]


def test_budget_from_launch_spec_arguments() -> None:
    assert batched_tokens_budget(["--max-num-batched-tokens", "256", "--enable-chunked-prefill"]) == 256
    assert batched_tokens_budget(["--max-num-batched-tokens=512"]) == 512
    assert batched_tokens_budget(["--model", "x"]) is None


def test_repeats_batches_and_filler_spread() -> None:
    assert batch_split(10) == [5, 5] and batch_split(8) == [8] and batch_split(17) == [6, 6, 5]
    assert spread(list(range(10)), 3) == [0, 4, 9]  # shortest, middle, longest: a mix of lengths
    assert spread([7], 3) == [7, 7, 7]
    assert parse_ints("8,1,4,4", "--batch-sizes") == (1, 4, 8)
    with pytest.raises(ConfigError, match="--batch-sizes"):
        parse_ints("1,x", "--batch-sizes")


def test_default_runs_keep_their_settings() -> None:
    """Without --scenarios a run's manifest settings are what they always were (resumes and figures unchanged)."""
    config = RunConfig(variant="v", inputs=Path("i.jsonl"), topology=endpoints("http://x/v1"))
    assert not {"scenarios", "batch_sizes", "repeats", "hit_lengths", "scenario_inputs"} & set(
        run_settings(config).to_dict()
    )
    with_batch = replace(config, scenarios=ScenarioSettings(scenarios=("cache", "batch")))
    assert run_settings(with_batch).scenarios == ["cache", "batch"]
    assert run_settings(with_batch).batch_sizes == [1, 4, 8]


def test_scenarios_need_salts() -> None:
    config = RunConfig(
        variant="v", inputs=Path("i.jsonl"), topology=endpoints("http://x/v1"), cold_mode="reset"
    )
    with pytest.raises(ConfigError, match="--cold salt"):
        execute_run(replace(config, scenarios=ScenarioSettings(scenarios=("batch",))))


# ---------------------------------------------------------------- a run with every scenario


def expected_counts(
    n_inputs: int, sizes: tuple[int, ...], n_lengths: list[int], repeats: int
) -> dict[str, int]:
    big = [b for b in sizes if b > 1]
    return {
        "batch_alone": n_inputs,
        "batch_warm_alone": n_inputs,
        "batch_member": n_inputs * len(big),
        "batch_warm_member": n_inputs * len(big),
        "batch_filler": n_inputs * 2 * sum(b - 1 for b in big),
        "hitlen_cold": n_inputs,
        "hitlen_prime": sum(n_lengths),
        "hitlen_full": sum(n_lengths),
        "repeats_alone": n_inputs * repeats,
        "repeats_batched": n_inputs * repeats,
        "traffic_cold": n_inputs,
        "traffic_warm_idle": n_inputs,
        "traffic_noise": n_inputs * 3,
        "traffic_warm": n_inputs,
    }


def test_every_scenario_records_every_request_in_its_cache_state(fake: FakeServer, tmp_path: Path) -> None:
    s = ScenarioSettings(
        scenarios=("batch", "hitlen", "repeats", "traffic"), batch_sizes=(1, 2, 3), repeats=3
    )
    run_dir = scenario_run(fake, tmp_path, s)
    loaded = load_run(run_dir)
    assert loaded.manifest.complete and loaded.manifest.settings.passes == []  # no cache scenario asked
    recs = finals(run_dir)
    lengths = [len(hit_lengths(n_tokens(w), BLOCK)) for w in WORDS]
    counts = Counter(r.pass_name for r in recs)
    assert counts == expected_counts(len(WORDS), (1, 2, 3), lengths, 3)
    assert loaded.manifest.expected_records == sum(counts.values()) == len(loaded.records)
    assert all(r.status == "ok" for r in recs)
    n_of = {f"ex{i}": n_tokens(w) for i, w in enumerate(WORDS)}
    salts = Counter(r.cache_salt for r in recs)
    for r in recs:
        assert r.scenario == r.pass_name.split("_")[0] and unit_of(r).kind == r.scenario
        cached = r.usage.cached_tokens
        if r.pass_name in ("batch_warm_alone", "batch_warm_member", "traffic_warm_idle", "traffic_warm"):
            assert cached == full_blocks(n_of[r.example_id]), r.pass_name
        elif r.pass_name == "hitlen_full":
            length = r.variation["hit_len"]
            assert cached == r.expected_cached_tokens == promised(n_of[r.example_id], length)
            assert r.variation["expected_cached"] == promised(n_of[r.example_id], length)
            assert r.endpoint == "completions" and r.settings["max_tokens"] == 6
        else:
            assert cached == 0, r.pass_name  # every other request is cold: its own fresh salt
        if r.pass_name == "hitlen_prime":
            assert r.settings["max_tokens"] == 1 and r.usage.prompt_tokens == r.variation["hit_len"]
    # salts: a warm request shares its cold twin's; a primed full request its prime's; nothing else shares one
    shared = {salt for salt, k in salts.items() if k > 1}
    for r in recs:
        if r.cache_salt in shared:
            assert r.pass_name in (
                "batch_alone", "batch_warm_alone", "batch_warm_member", "hitlen_prime", "hitlen_full",
                "traffic_cold", "traffic_warm_idle", "traffic_warm",
            )  # fmt: skip
    # a batch is its member and B-1 fillers from other inputs, released together (consecutive seqs)
    by_unit: dict[tuple[str, str], list[RequestRecord]] = {}
    for r in recs:
        by_unit.setdefault((r.example_id, r.scenario), []).append(r)
    for (ex, scenario), unit in by_unit.items():
        seqs = sorted(r.seq for r in unit)
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "a scenario unit runs back to back"
        if scenario != "batch":
            continue
        for size in (2, 3):
            member = [r for r in unit if r.pass_name == "batch_member" and r.variation["batch_size"] == size]
            fillers = [r for r in unit if r.pass_name == "batch_filler" and r.variation["batch_size"] == size]
            assert len(member) == 1 and len(fillers) == 2 * (size - 1)
            assert all(f.variation["input"] != f"qasper/{ex}" for f in fillers)
            assert all(f.example_id == ex for f in fillers)  # a filler belongs to the unit that sent it
    noise = [r for r in recs if r.pass_name == "traffic_noise" and r.variation["noise"] == 2]
    assert all(r.finish_reason == "stop" and r.settings["stop"] == [r.variation["stop"]] for r in noise)


def test_scenario_units_run_after_the_cache_units_one_at_a_time(fake: FakeServer, tmp_path: Path) -> None:
    s = ScenarioSettings(scenarios=("cache", "batch", "traffic"), batch_sizes=(1, 2))
    run_dir = scenario_run(fake, tmp_path, s, concurrency=3, passes=("cold", "warm", "repeat"))
    recs = finals(run_dir)
    cache = [r.seq for r in recs if r.scenario == "cache"]
    others = [r for r in recs if r.scenario != "cache"]
    assert max(cache) < min(r.seq for r in others)
    units: dict[tuple[str, str], list[int]] = {}
    for r in others:
        units.setdefault((r.example_id, r.scenario), []).append(r.seq)
    for seqs in units.values():
        assert sorted(seqs) == list(range(min(seqs), max(seqs) + 1))


def test_scenario_inputs_and_max_tokens(fake: FakeServer, tmp_path: Path) -> None:
    rows = [
        make_row(i, words=40, dataset=ds)
        for i, ds in enumerate(["qasper", "qasper", "gov_report", "gov_report"])
    ]
    path = write_rows(tmp_path / "inputs.jsonl", rows)
    s = ScenarioSettings(scenarios=("cache", "traffic"), inputs=2, max_tokens=3)
    recs = finals(scenario_run(fake, tmp_path, s, inputs=path, passes=("cold",)))
    assert {r.example_id for r in recs if r.scenario == "traffic"} == {"ex0", "ex2"}  # one of each dataset
    warm_cold = ("traffic_cold", "traffic_warm_idle", "traffic_warm")
    assert {r.settings["max_tokens"] for r in recs if r.pass_name in warm_cold} == {3}
    cold_limits = {r.settings["max_tokens"] for r in recs if r.pass_name == "cold"}
    assert cold_limits == {6}  # the cache scenario keeps the example's limit


def test_an_interrupted_unit_restarts_from_its_first_request(fake: FakeServer, tmp_path: Path) -> None:
    """batch_warm_alone of ex0 fails past the retries: the unit ends, the others complete; the next run re-sends
    the whole unit as group 1 (its first records stay on disk, superseded) and the run completes."""
    for seen in (1, 2, 3):  # the warm request and its 2 transport retries (FAST_RETRY) with the same salt
        fake.add_fault(Fault("5xx", match="Example ex0:", salt_seen=seen))
    s = ScenarioSettings(scenarios=("batch",), batch_sizes=(1, 2))
    run_dir = scenario_run(fake, tmp_path, s)
    first = load_run(run_dir)
    assert not first.manifest.complete
    ex0 = [r for r in first.records if r.example_id == "ex0"]
    assert [(r.pass_name, r.status) for r in ex0] == [("batch_alone", "ok"), ("batch_warm_alone", "error")]
    assert scenario_run(fake, tmp_path, s) == run_dir
    again = load_run(run_dir)
    assert again.manifest.complete
    sel = select_final(again.records)
    assert len(sel.final) == again.manifest.expected_records and sel.superseded == 2
    assert {r.group for r in sel.final.values() if r.example_id == "ex0"} == {1}
    assert {r.group for r in sel.final.values() if r.example_id != "ex0"} == {0}
    assert all(r.status == "ok" for r in sel.final.values())


def test_a_server_restart_inside_a_unit_reruns_it(fake: FakeServer, tmp_path: Path) -> None:
    fake.add_fault(Fault("restart", match="Example ex1:", salt_seen=1))  # before ex1's batch_warm_alone
    s = ScenarioSettings(scenarios=("batch",), batch_sizes=(1, 2))
    run_dir = scenario_run(fake, tmp_path, s)
    loaded = load_run(run_dir)
    assert loaded.manifest.complete and loaded.manifest.stats.counter("group_restarts") == 1
    restarted = [r for r in loaded.records if r.example_id == "ex1" and r.group == 0]
    assert restarted[-1].status == "invalid" and "restart" in (restarted[-1].error or "")
    assert all(r.status == "ok" for r in finals(run_dir))


def test_a_hit_the_server_does_not_honour_is_a_finding_not_a_failure(
    fake: FakeServer, tmp_path: Path
) -> None:
    fake.prefix_effect = PrefixEffect(drop_hit_at=frozenset({32}))
    s = ScenarioSettings(scenarios=("hitlen",), hit_lengths=(17, 32))
    run_dir = scenario_run(fake, tmp_path, s)
    m = load_run(run_dir).manifest
    assert m.complete
    dropped = [r for r in finals(run_dir) if r.pass_name == "hitlen_full" and r.variation["hit_len"] == 32]
    assert len(dropped) == 3 and all(r.status == "ok" and r.usage.cached_tokens == 0 for r in dropped)
    assert all(r.expected_cached_tokens == 32 for r in dropped)
    assert any("hitlen: 3 of 6 primed requests" in w for w in m.warnings)


def test_lbeval_run_scenario_options(
    fake: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = inputs(tmp_path)
    base = [
        "run",
        "--variant",
        "v1",
        "--inputs",
        str(path),
        "--base-url",
        fake.base_url,
        "--out",
        str(tmp_path / "r"),
    ]
    base += ["--quiet", "--retries", "1", "--backoff", "0.01", "--passes", "cold"]
    code = cli_main([*base, "--scenarios", "repeats,cache", "--repeats", "2", "--scenario-max-tokens", "2"])
    assert code == 0, capsys.readouterr().err
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    settings = load_run(run_dir).manifest.settings
    assert settings.scenarios == ["cache", "repeats"] and settings.repeats == 2
    assert settings.scenario_max_tokens == 2
    assert cli_main([*base, "--scenarios", "cache,nope", "--run-id", "x"]) == ConfigError.exit_code
    assert "unknown scenario 'nope'" in capsys.readouterr().err


def test_usage_that_overreports_inside_batches_fails_cache_reports_consistent_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The engine fault usage_overreport (docs/faults.md) on the fake, with the scenarios that send batches:
    every response claims its prompt's full blocks cached, the server's counters count what it computed. A
    batch has no window of one request, so before the batch's window was checked as a whole its cold members
    and fillers read usage's claim: invalid, and cache_isolation and cause_rows failed on the batch rows. Now
    each member's cached tokens are the server's (0 hits over a cold batch; the planned hit of the warm member
    over a warm one), every request is ok, and the gate FAILs cache_reports_consistent and nothing else."""
    s = ScenarioSettings(scenarios=("cache", "batch", "repeats"), batch_sizes=(1, 2, 3), repeats=4)
    with FakeServer() as a, FakeServer() as b:
        b.add_fault(Fault("overreport", times=-1))
        base = scenario_run(a, tmp_path, s, variant="base")
        over = scenario_run(b, tmp_path, s, variant="over", inputs=tmp_path / "inputs.jsonl")
    recs = finals(over)
    assert recs and all(r.status == "ok" for r in recs), [r.error for r in recs if r.status != "ok"][:3]
    n_of = {f"ex{i}": n_tokens(w) for i, w in enumerate(WORDS)}
    batched = [r for r in recs if r.pass_name in ("batch_member", "batch_warm_member", "batch_filler")]
    batched += [r for r in recs if r.pass_name == "repeats_batched"]
    assert len(batched) == 3 * (2 * 2 + 2 * 3) + 3 * 4  # 3 inputs: B=2 and B=3 cold and warm; 4 repeats
    for r in batched:
        n = n_of[r.variation["input"].split("/")[1]] if r.pass_name == "batch_filler" else n_of[r.example_id]
        assert r.usage.cached_tokens == full_blocks(n), r.pass_name  # usage always claims the full blocks
        truly = full_blocks(n) if r.pass_name == "batch_warm_member" else 0
        assert checked_cached(r) == truly, r.pass_name
        assert (r.server_cached, r.cache_finding is None) == ((None, True) if truly else (0, False)), (
            r.pass_name
        )
    assert all(r.cache_finding is None for r in finals(base))
    capsys.readouterr()
    assert cli_main(["gate", str(base), str(over)]) == 1
    out = capsys.readouterr().out
    failing = {line.split()[1].rstrip(":") for line in out.splitlines() if line.split()[:1] == ["FAIL"]}
    assert failing == {"cache_reports_consistent"}, out
