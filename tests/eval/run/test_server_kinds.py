"""Servers other than vLLM: identification, the capability mapping per kind, and runs that degrade honestly.

Against the fake server speaking SGLang's and llama-cpp-python's dialects (tests/support/fake_server.py DIALECTS), plus
wire-level parsing of llama-server's documented fields. SGLang and llama-server are untested on real servers.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from eval.errors import ConfigError
from eval.records.final import select_final
from eval.records.run_folder import load_run
from eval.records.types import ClientTimings
from eval.run.client import Client
from eval.run.probe import ProbeResult, probe_server
from eval.run.reply import RequestFailed
from eval.run.request import RequestSettings
from eval.run.retry import RetryPolicy
from eval.run.runner import execute_run
from eval.run.server_kinds import KINDS, identify
from eval.run.steps import EVICT_PROMPT
from eval.run.wire import WireDialect, parse_body, synthetic_token_id
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer, tokenize_text

FAST = RetryPolicy(retries=1, backoff_s=0.01, max_backoff_s=0.02)
GGUF = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"  # llama-cpp-python serves the model under its path


def probe(server: FakeServer, cold_mode: str = "auto") -> ProbeResult:
    with Client(server.base_url) as client:
        return probe_server(
            client, model=None, settings=RequestSettings(top_logprobs=5), modes={"chat", "raw"},
            cold_mode=cold_mode, policy=FAST,
        )  # fmt: skip


# ------------------------------------------------------------------------------------- identification


class _NothingThere:
    """A client whose every GET is a 404: an unidentified server."""

    def get_json(self, path: str) -> Any:
        raise RequestFailed("HTTP 404: Not Found", status=404, retryable=False)


@pytest.mark.parametrize(
    ("kwargs", "kind", "version", "evidence"),
    [
        ({}, "vllm", "0.0.0+fake", "GET /version"),
        ({"dialect": "sglang"}, "sglang", "0.5.0+fake", 'owned_by "sglang"; GET /server_info'),
        ({"dialect": "sglang", "owned_by": "x"}, "sglang", "0.5.0+fake", "GET /server_info"),
        ({"dialect": "sglang", "server_info_enabled": False}, "sglang", None, "no /server_info"),
        ({"dialect": "llama-cpp-python", "model": GGUF}, "llama-cpp-python", "0.3.36", "/openapi.json"),
    ],
)
def test_identify_from_what_the_server_answers(
    kwargs: dict[str, Any], kind: str, version: str | None, evidence: str
) -> None:
    with FakeServer(**kwargs) as server, Client(server.base_url) as client:
        owned = str(client.models()[0].get("owned_by"))
        ident = identify(client, owned, FAST)
        assert (ident.kind, ident.version) == (kind, version)
        assert evidence in ident.evidence
        if kind == "sglang" and version is not None:
            assert ident.info["enable_cache_report"] is True and ident.info["page_size"] == server.block_size


def test_an_unidentified_server_is_read_as_vllm_compatible() -> None:
    ident = identify(_NothingThere(), "someone", FAST)  # type: ignore[arg-type]
    assert ident.kind == "unknown" and "owned_by 'someone'" in ident.evidence
    assert KINDS["unknown"].token_ids == "prefix" and KINDS["unknown"].notes


# ------------------------------------------------------------------------------------- probe per kind


def test_vllm_probe_records_its_kind_and_stays_verified() -> None:
    with FakeServer() as server:
        res = probe(server)
    res.require()
    assert (res.server_kind, res.cold_mode, res.cache_verification) == ("vllm", "salt", "verified")
    assert res.request_fields == {} and res.warnings == []
    assert "verified by usage.prompt_tokens_details.cached_tokens" in res.cold_method


def test_sglang_probe_maps_each_capability() -> None:
    with FakeServer(dialect="sglang", block_size=16) as server:
        res = probe(server)
        bodies = [body for _, body in server.requests]
        assert server.reset_calls == 1  # the reset check went to /flush_cache
    res.require()
    caps = res.capabilities
    assert res.server_kind == "sglang" and res.version == "0.5.0+fake" and res.cold_mode == "salt"
    assert res.cached_tokens_reported and res.cache_hit_seen and res.salt_honored
    assert res.reset_prefix_cache is True and "POST /flush_cache works" in caps["reset_prefix_cache"].detail
    assert res.block_size == 16 and res.prefix_caching is True  # from /server_info page_size
    assert res.cache_verification == "verified" and res.tokenize
    assert caps["metrics"].ok is False and "sglang:" in caps["metrics"].fix and not res.metrics
    assert "choices[].token_ids" in caps["token_ids"].detail
    assert all(b.get("return_token_ids") is True for b in bodies)
    assert any("untested on a real SGLang" in w for w in res.warnings)


def test_sglang_without_cache_report_names_its_flag() -> None:
    with FakeServer(dialect="sglang", report_cached_tokens=False) as server:
        res = probe(server)
    with pytest.raises(ConfigError, match="--enable-cache-report"):
        res.require()


def test_sglang_reset_mode_flushes() -> None:
    with FakeServer(dialect="sglang") as server:
        res = probe(server, cold_mode="reset")
    res.require()
    assert res.capabilities["reset_prefix_cache"].required and res.reset_prefix_cache


def test_llama_cpp_python_probe_degrades_to_unverified() -> None:
    with FakeServer(dialect="llama-cpp-python", model=GGUF) as server:
        res = probe(server)
        sent = [body for _, body in server.requests]
    res.require()  # nothing it lacks stops the run: it is stated instead
    caps = res.capabilities
    assert res.server_kind == "llama-cpp-python" and res.version == "0.3.36"
    assert res.cold_mode == "evict" and res.cache_verification == "unverified"
    assert not res.cached_tokens_reported and caps["cached_tokens"].required is False
    assert "ignores cache_salt" in caps["cache_salt"].detail and caps["cache_salt"].ok is False
    assert "/extras/tokenize" in caps["token_ids"].detail and res.tokenize
    assert res.request_fields == {"repeat_penalty": 1.0}
    assert all(b["repeat_penalty"] == 1.0 for b in sent)
    assert "NOT verified" in res.cold_method
    text = " ".join(res.warnings)
    assert "UNVERIFIED" in text and "repeat_penalty 1.0" in text and "no per-request server metrics" in text


@pytest.mark.parametrize(("cold", "fix"), [("salt", "--cold evict"), ("reset", "--cold evict")])
def test_llama_cpp_python_refuses_salt_and_reset(cold: str, fix: str) -> None:
    with FakeServer(dialect="llama-cpp-python", model=GGUF) as server:
        res = probe(server, cold_mode=cold)
    with pytest.raises(ConfigError, match="lacks what lbeval needs") as err:
        res.require()
    assert fix in str(err.value)


def test_evict_is_refused_on_a_server_that_caches_many_sequences() -> None:
    with FakeServer() as server:
        res = probe(server, cold_mode="evict")
    with pytest.raises(ConfigError, match="--cold evict suits a server that caches one sequence"):
        res.require()


# ------------------------------------------------------------------------------------- the wire


def _timings() -> ClientTimings:
    return ClientTimings(sent_at=0.0, first_token_s=None, done_s=0.1)


def test_llama_server_ids_and_timings_cache_n() -> None:
    body = {
        "choices": [{"message": {"content": "a b"}, "finish_reason": "length", "logprobs": {"content": [
            {"id": 7, "token": "a", "logprob": -0.1, "top_logprobs": [{"id": 7, "token": "a", "logprob": -0.1},
                                                                    {"id": 9, "token": "c", "logprob": -2.0}]},
            {"id": 8, "token": " b", "logprob": -0.2, "top_logprobs": [{"id": 8, "token": " b", "logprob": -0.2}]},
        ]}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 2},
        "timings": {"cache_n": 32, "prompt_n": 8},
    }  # fmt: skip
    reply = parse_body("chat", json.dumps(body).encode(), _timings(), KINDS["llama-server"].dialect({}))
    assert reply.token_ids == [7, 8] and reply.topk is not None and reply.topk.ids == [[7, 9], [8]]
    assert reply.usage.cached_tokens == 32


def test_sglang_absent_details_mean_zero_only_with_the_cache_report() -> None:
    body = json.dumps(
        {"choices": [{"text": "x", "finish_reason": "length", "token_ids": [5]}],
         "usage": {"prompt_tokens": 9, "completion_tokens": 1, "prompt_tokens_details": None}}
    ).encode()  # fmt: skip
    on = KINDS["sglang"].dialect({"enable_cache_report": True})
    assert parse_body("completions", body, _timings(), on).usage.cached_tokens == 0
    off = KINDS["sglang"].dialect({})
    assert parse_body("completions", body, _timings(), off).usage.cached_tokens is None
    assert parse_body("completions", body, _timings(), off).token_ids == [5]


def test_token_text_without_a_tokenizer_is_an_error_not_a_guess() -> None:
    body = {"choices": [{"text": "x", "logprobs": {"tokens": ["x"], "token_logprobs": [-0.1],
                                                     "top_logprobs": [{"x": -0.1}]}}]}  # fmt: skip
    dialect = WireDialect(token_ids="text", tokenize_path=None)
    with pytest.raises(RequestFailed, match="without token ids"):
        parse_body("completions", json.dumps(body).encode(), _timings(), dialect)


def test_text_tokens_map_through_extras_tokenize() -> None:
    with FakeServer(dialect="llama-cpp-python", model=GGUF) as server, Client(server.base_url) as client:
        client.dialect = KINDS["llama-cpp-python"].dialect({})
        assert client.text_token_id(" t1234") == 1234 and client.text_token_id("\n") == 198
        two = client.text_token_id(" t5 t6")  # not one token: a stable synthetic id below 0
        assert two == synthetic_token_id(" t5 t6") < 0
        with pytest.raises(RequestFailed, match="text only"):
            client.tokenize(GGUF, messages=[{"role": "user", "content": "x"}])


# ------------------------------------------------------------------------------------- whole runs


def _inputs(tmp_path: Path) -> Path:
    rows = [make_row(0), make_row(1, dataset="gov_report", mode="raw")]
    return write_rows(tmp_path / "inputs.jsonl", rows)


def test_a_run_on_llama_cpp_python_is_unverified_everywhere_and_evicts_before_cold(tmp_path: Path) -> None:
    with FakeServer(dialect="llama-cpp-python", model=GGUF) as server:
        run_dir = execute_run(config_for(server, _inputs(tmp_path), tmp_path / "runs", cold_mode="auto"))
        sent = list(server.requests)
    loaded = load_run(run_dir)
    m = loaded.manifest
    assert m.complete and m.settings.cold_mode == "evict"
    assert m.settings.server_fields == {"repeat_penalty": 1.0}
    assert m.probe.server_kind == "llama-cpp-python" and m.probe.cache_verification == "unverified"
    assert any("UNVERIFIED" in w for w in m.warnings)
    finals = list(select_final(loaded.records).final.values())
    assert finals and all(r.status == "ok" and r.cache_check == "unverified" for r in finals)
    assert all(r.usage.cached_tokens is None and r.expected_cached_tokens is None for r in finals)
    cold = next(r for r in finals if r.pass_name == "cold" and r.example_id == "ex0")
    assert cold.cache_salt is None and cold.output_token_ids and all(i > 0 for i in cold.output_token_ids)
    # every generation request asked for greedy decoding without its default penalty
    assert all(body.get("repeat_penalty") == 1.0 for _, body in sent)
    # an eviction prompt right before every cold and timing_cold request
    evictions = [i for i, (_, b) in enumerate(sent) if b.get("prompt") == EVICT_PROMPT]
    assert (
        len(evictions)
        == Counter(r.pass_name for r in finals)["cold"] + Counter(r.pass_name for r in finals)["timing_cold"]
    )
    assert m.stats.counter("evictions") == len(evictions)
    on_disk = (run_dir / "records.jsonl").read_text().splitlines()
    assert all(json.loads(line)["cache_check"] == "unverified" for line in on_disk)


def test_llama_cpp_python_outputs_match_the_same_model_on_vllm(tmp_path: Path) -> None:
    """The token-id mapping gives the ids the fake generated: a cross-engine comparison compares real ids."""
    inputs = _inputs(tmp_path)
    with FakeServer() as vllm:
        a = execute_run(config_for(vllm, inputs, tmp_path / "runs", variant="vllm"))
    with FakeServer(dialect="llama-cpp-python", model=GGUF) as llama:
        b = execute_run(config_for(llama, inputs, tmp_path / "runs", variant="llamacpp", cold_mode="auto"))
    fa, fb = (select_final(load_run(d).records).final for d in (a, b))
    for slot, rec in fa.items():
        if slot.pass_name in ("cold", "warm", "repeat"):
            other = fb[slot]
            assert other.output_token_ids == rec.output_token_ids and other.output_text == rec.output_text
            assert other.topk is not None and rec.topk is not None
            assert other.topk.ids[0][:5] == rec.topk.ids[0][:5]


def test_a_run_on_sglang_is_verified(tmp_path: Path) -> None:
    with FakeServer(dialect="sglang") as server:
        run_dir = execute_run(config_for(server, _inputs(tmp_path), tmp_path / "runs", cold_mode="auto"))
    loaded = load_run(run_dir)
    finals = select_final(loaded.records).final.values()
    assert loaded.manifest.complete and loaded.manifest.probe.server_kind == "sglang"
    assert all(r.status == "ok" and r.cache_check == "verified" for r in finals)
    warm = [r for r in finals if r.pass_name == "warm"]
    cold = [r for r in finals if r.pass_name == "cold"]
    assert all(r.usage.cached_tokens == 0 for r in cold)  # absent in the answer, read as 0
    assert all(r.usage.cached_tokens and r.usage.cached_tokens == r.expected_cached_tokens for r in warm)
    assert loaded.manifest.settings.server_fields is not None  # return_token_ids


def test_a_run_on_sglang_in_reset_mode_flushes_before_each_cold(tmp_path: Path) -> None:
    with FakeServer(dialect="sglang") as server:
        config = config_for(server, _inputs(tmp_path), tmp_path / "runs", cold_mode="reset")
        run_dir = execute_run(config)
        flushes = server.reset_calls
    finals = list(select_final(load_run(run_dir).records).final.values())
    colds = sum(r.pass_name in ("cold", "timing_cold") for r in finals)
    assert flushes == colds + 1  # one per cold request, and the probe's check
    assert all(r.status == "ok" and r.cache_check == "verified" for r in finals)


def test_tokens_from_the_fake_tokenizer_round_trip() -> None:
    assert tokenize_text(" t77") == [77]
