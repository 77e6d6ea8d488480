"""A routing endpoint (`--dp-ranks N`, eval/run/replicas.py): per-engine /metrics views, the pin check, the rank
ledger, the Client's pin header, and runs on the fake server's routing mode (N engines behind one URL) with the
header honoured (every record verified on its own engine) and ignored (misrouted records invalid and counted)."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.analyze.score import score_run
from eval.cli import main as cli_main
from eval.errors import ConfigError
from eval.prepare.inputs import sha256_text
from eval.records.final import select_final
from eval.records.run_folder import load_run
from eval.records.types import RequestRecord
from eval.records.vocabulary import COLD_CONDITION, SCENARIO_NAMES, WARM_CONDITION
from eval.run.client import Client
from eval.run.config import endpoints
from eval.run.ledger import SendLedger
from eval.run.metrics_text import engine_deltas, engine_names, engine_view, parse_metrics
from eval.run.replicas import (
    DP_RANK_HEADER,
    MISROUTED,
    RankLedger,
    dp_ranks,
    pin_finding,
    rank_headers,
    refuse_reset_on_ranks,
    replica_count,
)
from eval.run.runner import RunConfig, execute_run
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer

TWO_ENGINES = """\
# TYPE process_start_time_seconds gauge
process_start_time_seconds 100.0
# TYPE vllm:request_success counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} {f0}
vllm:request_success_total{engine="1",finished_reason="length",model_name="m"} {f1}
vllm:request_success_total{engine="1",finished_reason="stop",model_name="m"} 1.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} {q0}
vllm:prefix_cache_queries_total{engine="1",model_name="m"} {q1}
"""


def scrape(f0: float, f1: float, q0: float, q1: float) -> str:
    return (
        TWO_ENGINES.replace("{f0}", str(f0))
        .replace("{f1}", str(f1))
        .replace("{q0}", str(q0))
        .replace("{q1}", str(q1))
    )


def test_an_engine_view_keeps_its_series_and_the_unlabelled_ones() -> None:
    snap = parse_metrics(scrape(3, 5, 300, 500))
    assert engine_names(snap) == ["0", "1"]
    one = engine_view(snap, "1")
    assert one.counter("vllm:request_success") == 6.0  # 5 length + 1 stop, engine 1 only
    assert one.counter("vllm:prefix_cache_queries") == 500.0
    assert one.total("process_start_time_seconds") == 100.0  # no engine label: every engine's view has it
    assert snap.counter("vllm:request_success") == 9.0  # the whole scrape still sums over engines
    assert engine_view(snap, "7").samples.keys() == {"process_start_time_seconds"}


def test_engine_deltas_are_per_engine() -> None:
    before, after = parse_metrics(scrape(3, 5, 300, 500)), parse_metrics(scrape(4, 5, 340, 500))
    assert engine_deltas(before, after, "vllm:request_success") == {"0": 1.0, "1": 0.0}
    assert engine_deltas(before, after, "vllm:prefix_cache_queries") == {"0": 40.0, "1": 0.0}


@pytest.mark.parametrize(
    ("after", "rank", "prompt_tokens", "misrouted"),
    [
        ((4, 5, 340, 500), 0, 40, False),  # engine 0 counted it: one request, this prompt's 40 queries
        ((3, 6, 300, 540), 0, 40, True),  # engine 0 did not move, engine 1 did: the pin was ignored
        ((3, 5, 300, 500), 0, 40, False),  # nobody counted it (yet): the scrapes cannot tell
        ((4, 6, 325, 540), 0, 40, True),  # a swap: engine 0 counted a 25-token prompt, engine 1 this one
        ((4, 6, 325, 530), 0, 40, False),  # engine 0 counted another prompt, nobody this one: cannot tell
        ((4, 5, 330, 500), 1, 30, True),  # rank 1's 30-token prompt counted by engine 0, engine 1 still
    ],
)
def test_pin_finding(
    after: tuple[int, int, int, int], rank: int, prompt_tokens: int, misrouted: bool
) -> None:
    before = parse_metrics(scrape(3, 5, 300, 500))
    finding = pin_finding(rank, before, parse_metrics(scrape(*after)), prompt_tokens)
    assert (finding is not None) == misrouted, finding
    if misrouted:
        assert finding is not None and f"{DP_RANK_HEADER}: {rank}" in finding and "ignored the pin" in finding


def test_pin_finding_without_engine_labels_says_nothing() -> None:
    plain = "vllm:request_success_total 1.0\n"
    assert pin_finding(0, parse_metrics(plain), parse_metrics("vllm:request_success_total 1.0\n"), 10) is None


def test_a_rank_ledger_shares_the_marks_and_counts_its_answers_apart() -> None:
    shared = SendLedger()
    a, b = RankLedger(shared, 0), RankLedger(shared, 1)
    with a.sending():
        assert shared.mark() is None and b.mark() is None  # in flight, seen by every view
    a.answer("http://h:1")
    a.answer("http://h:1")
    b.answer("http://h:1")
    assert (a.answered("http://h:1"), b.answered("http://h:1")) == (2, 1)
    assert shared.mark() == b.mark() == 1


# --- the fake server's routing mode ------------------------------------------------------------------------------


def chat(url: str, text: str, rank: int | None, salt: str | None = None) -> tuple[int, dict[str, Any]]:
    """(status, body) of one chat request to the fake, pinned to `rank` when given, under `salt` when given."""
    headers = {"Content-Type": "application/json"} | ({} if rank is None else {DP_RANK_HEADER: str(rank)})
    body = {"model": "fake-model", "messages": [{"role": "user", "content": text}], "max_tokens": 2}
    if salt is not None:
        body["cache_salt"] = salt
    req = urllib.request.Request(url + "/chat/completions", json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def cached(reply: tuple[int, dict[str, Any]]) -> int:
    return int(reply[1]["usage"]["prompt_tokens_details"]["cached_tokens"])


def metrics_of(fake: FakeServer) -> str:
    with urllib.request.urlopen(fake.base_url.removesuffix("/v1") + "/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def test_the_fake_routes_by_the_header_with_a_cache_per_engine() -> None:
    prompt = " ".join(f"w{i}" for i in range(40))
    with FakeServer(dp_engines=2) as fake:
        assert cached(chat(fake.base_url, prompt, 1)) == 0
        assert cached(chat(fake.base_url, prompt, 1)) == 32  # engine 1's cache: 2 blocks of 16 (48 tokens)
        assert cached(chat(fake.base_url, prompt, 0)) == 0  # engine 0 has not seen it
        assert chat(fake.base_url, prompt, 2)[0] == 400  # no engine 2
        assert [e for e, *_ in fake.routed] == [1, 1, 0]
        snap = parse_metrics(metrics_of(fake))
        assert engine_names(snap) == ["0", "1"]
        assert engine_view(snap, "1").counter("vllm:request_success") == 2.0
        assert engine_view(snap, "0").counter("vllm:prefix_cache_hits") == 0.0
        assert engine_view(snap, "1").counter("vllm:prefix_cache_hits") == 32.0


def test_the_fake_can_ignore_the_header() -> None:
    with FakeServer(dp_engines=2, dp_honor_header=False) as fake:
        for _ in range(4):
            assert chat(fake.base_url, "a b c", 0)[0] == 200
        assert [e for e, *_ in fake.routed] == [0, 1, 0, 1]  # round-robin, whatever the pin


def test_the_fake_can_route_by_salt() -> None:
    salts = [f"s{i}" for i in range(8)]
    engine = {s: int(hashlib.sha256(s.encode()).hexdigest(), 16) % 2 for s in salts}  # worked out here
    assert set(engine.values()) == {0, 1}  # both engines are tried
    with FakeServer(dp_engines=2, dp_honor_header=False, dp_by_salt=True) as fake:
        for salt in salts + salts[::-1]:
            assert chat(fake.base_url, "a b c", 0, salt)[0] == 200
        assert [e for e, *_ in fake.routed] == [engine[s] for s in salts + salts[::-1]]  # not the pin's


def test_the_client_sends_its_extra_headers() -> None:
    with FakeServer(dp_engines=3) as fake, Client(fake.base_url, extra_headers=rank_headers(2)) as client:
        client.send(
            "chat", {"model": "fake-model", "messages": [{"role": "user", "content": "x y"}], "max_tokens": 1}
        )
        client.send(
            "chat",
            {
                "model": "fake-model",
                "messages": [{"role": "user", "content": "x y"}],
                "max_tokens": 1,
                "stream": True,
            },
        )
        assert [e for e, *_ in fake.routed] == [2, 2]


# --- runs on a routing endpoint ----------------------------------------------------------------------------------


def six_rows(tmp_path: Path) -> Path:
    return write_rows(tmp_path / "inputs.jsonl", [make_row(i, words=40 + 10 * i) for i in range(6)])


def engines_by_request(fake: FakeServer) -> dict[tuple[str, str | None], set[int]]:
    """(prompt sha256, cache_salt) -> the engines the fake sent it to: where each record's request went."""
    out: dict[tuple[str, str | None], set[int]] = {}
    for engine, prompt, salt in fake.routed:
        out.setdefault((sha256_text(prompt), salt), set()).add(engine)
    return out


def routed(fake: FakeServer, inputs: Path, out: Path, ranks: int = 2) -> RunConfig:
    return replace(config_for(fake, inputs, out), topology=endpoints(fake.base_url, dp_ranks=ranks))


def test_every_record_is_pinned_and_verified_on_its_own_engine(tmp_path: Path) -> None:
    with FakeServer(dp_engines=2) as fake:
        run_dir = execute_run(routed(fake, six_rows(tmp_path), tmp_path / "runs"))
        engines_of = engines_by_request(fake)
    loaded = load_run(run_dir)
    assert loaded.manifest.complete
    finals = select_final(loaded.records).final
    assert finals and all(r.status == "ok" for r in finals.values())  # every warm hit its cold's engine
    assert {r.replica for r in loaded.records} == {0, 1}
    for (
        rec
    ) in loaded.records:  # the request went to the engine it names, and that engine's figures are its own
        assert engines_of[(rec.prompt_sha256, rec.cache_salt)] == {rec.replica}, rec.key
        assert rec.server_metrics is not None and rec.server_foreign is None, rec.key
    line = loaded.manifest.sessions[-1]
    assert [e.pin for e in line.replicas or []] == [{DP_RANK_HEADER: "0"}, {DP_RANK_HEADER: "1"}]
    assert {e.base_url for e in line.replicas or []} == {fake.base_url} and line.dp_ranks == 2
    assert loaded.manifest.stats.counter(MISROUTED) == 0


def test_a_router_that_ignores_the_pin_makes_records_invalid_and_counted(tmp_path: Path) -> None:
    # routed by salt, not round-robin: a probe sends its first row and its cache model's prime at once, so under
    # round-robin which engine holds the prime (and whether the whole row after it hits) turns on which of the
    # two arrived first; the ranks' probes could then differ and the run be refused (rightly, but not what this
    # test is about). By salt each probe's salts meet one engine's cache
    with FakeServer(dp_engines=2, dp_honor_header=False, dp_by_salt=True) as fake:
        run_dir = execute_run(routed(fake, six_rows(tmp_path), tmp_path / "runs"))
    loaded = load_run(run_dir)
    flagged = [r for r in loaded.records if r.error is not None and "ignored the pin" in r.error]
    assert flagged and all(r.status == "invalid" for r in flagged)
    assert loaded.manifest.stats.counter(MISROUTED) == len(flagged)
    # every flagged attempt is counted, recovered by a retry or not
    invalid = score_run(run_dir).scores.invalid
    warm = sum(r.pass_name in WARM_CONDITION for r in flagged)
    cold = sum(r.pass_name in COLD_CONDITION for r in flagged)
    assert warm + cold > 0 and invalid.warm_attempts >= warm and invalid.cold_attempts >= cold


def test_a_request_misrouted_on_every_attempt_is_an_invalid_final(tmp_path: Path) -> None:
    # round-robin above may land a retry on the pinned engine (the ranks send concurrently: which retry lands
    # where depends on timing); a router that sends everything to engine 0 misroutes rank 1 on every attempt
    with FakeServer(dp_engines=2, dp_honor_header=False, dp_ignore_to=0) as fake:
        run_dir = execute_run(routed(fake, six_rows(tmp_path), tmp_path / "runs"))
        assert {e for e, *_ in fake.routed} == {0}
    loaded = load_run(run_dir)
    finals = select_final(loaded.records).final.values()
    on_rank1 = [r for r in finals if r.replica == 1]
    assert on_rank1 and all(r.status == "invalid" and "ignored the pin" in (r.error or "") for r in on_rank1)
    assert all(r.status == "ok" for r in finals if r.replica == 0)  # engine 0 answered its own pins
    invalid = score_run(run_dir).scores.invalid
    # what the gate's no_invalid_warm counts
    assert invalid.warm_final == sum(r.pass_name in WARM_CONDITION for r in on_rank1) > 0


def test_the_command_line_takes_dp_ranks_with_one_base_url(tmp_path: Path) -> None:
    with FakeServer(dp_engines=2) as fake:
        argv = ["run", "--variant", "v", "--inputs", str(six_rows(tmp_path)), "--out", str(tmp_path / "runs")]
        argv += ["--quiet", "--passes", "cold,warm", "--base-url", fake.base_url, "--dp-ranks", "2"]
        assert cli_main(argv) == 0
        assert {e for e, *_ in fake.routed} == {0, 1}
    loaded = load_run(next((tmp_path / "runs" / "v").glob("run-*")))
    assert {r.replica for r in loaded.records} == {0, 1}
    assert all(r.status == "ok" for r in select_final(loaded.records).final.values())


def test_a_running_spec_with_dp_ranks_routes(tmp_path: Path) -> None:
    with FakeServer(dp_engines=2) as fake:
        specs = tmp_path / "specs.toml"
        specs.write_text(f'[variants.dp]\nurl = "{fake.base_url}"\ndp_ranks = 2\n', encoding="utf-8")
        argv = ["run", "--variant", "dp", "--specs", str(specs), "--inputs", str(six_rows(tmp_path))]
        argv += ["--out", str(tmp_path / "runs"), "--quiet", "--passes", "cold,warm"]
        assert cli_main(argv) == 0
        assert {e for e, *_ in fake.routed} == {0, 1}


def test_a_running_spec_with_a_url_list_is_its_replicas(tmp_path: Path) -> None:
    with FakeServer() as a, FakeServer() as b:
        specs = tmp_path / "specs.toml"
        specs.write_text(f'[variants.two]\nurl = ["{a.base_url}", "{b.base_url}"]\n', encoding="utf-8")
        argv = ["run", "--variant", "two", "--specs", str(specs), "--inputs", str(six_rows(tmp_path))]
        argv += ["--out", str(tmp_path / "runs"), "--quiet", "--passes", "cold,warm"]
        assert cli_main(argv) == 0
        assert len(a.requests) > 2 and len(b.requests) > 2  # both served inputs (beyond their probes)
    loaded = load_run(next((tmp_path / "runs" / "two").glob("run-*")))
    assert [e.base_url for e in loaded.manifest.sessions[-1].replicas or []] == [a.base_url, b.base_url]


def test_a_cache_reset_or_several_urls_are_refused_with_dp_ranks(tmp_path: Path) -> None:
    config = RunConfig(
        variant="v", inputs=tmp_path / "i.jsonl", topology=endpoints("http://a/v1", dp_ranks=2)
    )
    assert (dp_ranks(config), replica_count(config)) == (2, 2)
    refuse_reset_on_ranks(config)  # salt: fine
    with pytest.raises(ConfigError, match="a cache reset empties every rank's cache"):
        refuse_reset_on_ranks(replace(config, cold_mode="reset"))
    with pytest.raises(ConfigError, match="routes through one endpoint"):
        endpoints("http://a/v1", "http://b/v1", dp_ranks=2)


def test_an_endpoint_without_an_engine_per_rank_is_refused(tmp_path: Path) -> None:
    with FakeServer(dp_engines=2) as fake:
        with pytest.raises(ConfigError, match=r"--dp-ranks 3: .* shows engine\(s\) \['0', '1'\], not 2"):
            execute_run(routed(fake, six_rows(tmp_path), tmp_path / "runs", ranks=3))
        assert all(
            (salt or "").startswith("lbeval-probe-") for _, _, salt in fake.routed
        )  # nothing sent but the probe's (its capability and cache-model requests)


def test_scenario_units_on_a_routing_endpoint_stay_on_their_engine(tmp_path: Path) -> None:
    s = ScenarioSettings(scenarios=SCENARIO_NAMES, batch_sizes=(1, 2), inputs=4, max_tokens=3)
    with FakeServer(dp_engines=2) as fake:
        config = replace(
            routed(fake, six_rows(tmp_path), tmp_path / "runs"), scenarios=s, passes=("cold", "warm")
        )
        loaded = load_run(execute_run(config))
        by_salt: dict[str | None, set[int]] = {}
        for engine, _, salt in fake.routed:
            by_salt.setdefault(salt, set()).add(engine)
    assert loaded.manifest.complete and {r.scenario for r in loaded.records} == set(SCENARIO_NAMES)
    salted = [r for r in loaded.records if r.cache_salt is not None]
    assert len(salted) > len(loaded.records) // 2
    for rec in salted:  # primes, fillers and batches included: every request of its salt on its engine
        assert by_salt[rec.cache_salt] == {rec.replica}, rec.key
    assert loaded.manifest.stats.counter(MISROUTED) == 0
    assert not [r for r in loaded.records if r.error is not None and "ignored the pin" in r.error]


def test_ab_refuses_a_routing_endpoint_and_takes_a_url_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def ab(table: str) -> int:
        specs = tmp_path / "specs.toml"
        specs.write_text(f"[variants.many]\n{table}\n", encoding="utf-8")
        argv = ["ab", "many", "many", "--specs", str(specs), "--inputs", str(six_rows(tmp_path))]
        return cli_main([*argv, "--out", str(tmp_path / "runs")])

    assert ab('url = "http://127.0.0.1:9/v1"\ndp_ranks = 2') == ConfigError.exit_code
    assert "side A is a routing endpoint with 2 ranks (dp_ranks)" in capsys.readouterr().err
    # a url list is N replicas, which ab pairs: past the checks, refused only by the dead endpoints (exit 1)
    assert ab('url = ["http://127.0.0.1:9/v1", "http://127.0.0.1:8/v1"]') == 1
    assert "routing endpoint" not in capsys.readouterr().err


def test_an_interrupted_run_on_a_routing_endpoint_resumes_pinned_without_duplicates(tmp_path: Path) -> None:
    seen: list[RequestRecord] = []

    def stop_after_seven(rec: RequestRecord) -> None:
        seen.append(rec)
        if len(seen) == 7:
            raise KeyboardInterrupt

    with FakeServer(dp_engines=2) as fake:
        config = routed(fake, six_rows(tmp_path), tmp_path / "runs")
        with pytest.raises(KeyboardInterrupt):
            execute_run(config, on_record=stop_after_seven)
        left = load_run(next((tmp_path / "runs" / "v1").glob("run-*")))
        assert not left.manifest.complete and 7 <= len(left.records) < left.manifest.expected_records
        loaded = load_run(execute_run(config))
        engines_of = engines_by_request(fake)
    assert loaded.manifest.complete
    assert all(r.status == "ok" for r in select_final(loaded.records).final.values())
    keys = [r.key for r in loaded.records]
    assert len(keys) == len(set(keys))  # nothing sent twice
    for rec in loaded.records:  # before and after the interruption: each on the engine it names
        assert engines_of[(rec.prompt_sha256, rec.cache_salt)] == {rec.replica}, rec.key
