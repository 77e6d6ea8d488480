"""The server probe against fake servers with and without each capability."""

from __future__ import annotations

import pytest

from eval.errors import ConfigError, LbevalError
from eval.run import probe as probe_module
from eval.run.client import Client
from eval.run.probe import ProbeResult, probe_server
from eval.run.request import RequestSettings
from eval.run.retry import RetryPolicy
from tests.support import fake_server
from tests.support.fake_server import BatchEffect, FakeServer, Fault

FAST = RetryPolicy(retries=2, backoff_s=0.01, max_backoff_s=0.02)


def probe(
    server: FakeServer, cold_mode: str = "salt", model: str | None = None, top: int = 20
) -> ProbeResult:
    with Client(server.base_url) as client:
        return probe_server(
            client,
            model=model,
            settings=RequestSettings(top_logprobs=top),
            modes={"chat", "raw"},
            cold_mode=cold_mode,
            policy=FAST,
        )


def test_full_capabilities() -> None:
    with FakeServer(block_size=32, max_model_len=4096) as server:
        res = probe(server)
        res.require()
        assert res.model == server.model and res.max_model_len == 4096
        assert res.version == server.version
        assert res.metrics and res.prefix_caching is True and res.block_size == 32
        assert res.cached_tokens_reported and res.cache_hit_seen and res.salt_honored
        assert res.reset_prefix_cache is True and res.tokenize
        assert res.process_start_time == server.state.start_time
        assert res.warnings == []
        paths = {path for path, _ in server.requests}
        assert paths == {"/v1/chat/completions", "/v1/completions"}  # both modes of the inputs were tried
        assert res.to_dict()["capabilities"]["cached_tokens"]["ok"] is True


@pytest.mark.parametrize(
    ("kwargs", "cold_mode", "flag"),
    [
        ({"report_cached_tokens": False}, "salt", "--enable-prompt-tokens-details"),
        ({"max_logprobs": 5}, "salt", "--max-logprobs 20"),
        ({"reset_enabled": False}, "reset", "VLLM_SERVER_DEV_MODE=1"),
        ({"reset_success": False}, "reset", "VLLM_SERVER_DEV_MODE=1"),
    ],  # a salt that hits is a fault, not a missing capability: tests/eval/run/test_plan_findings.py
)
def test_missing_required_capability_names_the_flag(
    kwargs: dict[str, object], cold_mode: str, flag: str
) -> None:
    with FakeServer(**kwargs) as server:  # type: ignore[arg-type]
        res = probe(server, cold_mode=cold_mode)
        with pytest.raises(ConfigError, match="lacks what lbeval needs") as err:
            res.require()
        assert flag in str(err.value)


def test_optional_capabilities_degrade_with_warnings() -> None:
    with FakeServer(reset_enabled=False, tokenize_enabled=False, metrics_enabled=False) as server:
        res = probe(server)
        res.require()  # salt mode does not need reset; metrics and tokenize are optional
        assert res.reset_prefix_cache is False and not res.tokenize and not res.metrics
        assert res.block_size is None and res.prefix_caching is None
        text = " ".join(res.warnings)
        assert "no /metrics" in text and "no /tokenize" in text


def test_prefix_caching_off_is_a_warning_not_a_stop() -> None:
    with FakeServer(prefix_caching=False) as server:
        res = probe(server)
        res.require()
        assert res.prefix_caching is False and res.cache_hit_seen is False
        assert any("prefix caching is off" in w for w in res.warnings)


def test_unknown_model_and_unreachable_server() -> None:
    with FakeServer() as server, pytest.raises(ConfigError, match="served: fake-model"):
        probe(server, model="other")
    with (
        Client("http://127.0.0.1:9/v1", timeout_s=5) as client,
        pytest.raises(LbevalError, match="cannot list models at .* after 3 attempts: connection failed"),
    ):
        probe_server(client, model=None, settings=RequestSettings(), modes={"chat"}, policy=FAST)


def test_probe_retries_503s_with_the_run_policy() -> None:
    # the reporter's case: 503s at start (a server still loading) with --retries 2 ended each run at the probe
    with FakeServer() as server:
        fault = server.add_fault(Fault("5xx", times=2))
        res = probe(server)
        res.require()
        assert fault.times == 0 and res.cache_hit_seen and res.salt_honored


def test_a_probe_that_keeps_failing_names_the_request_the_last_status_and_the_attempts() -> None:
    with FakeServer() as server:
        server.add_fault(Fault("5xx", times=-1, status=503, message="engine loading"))
        with pytest.raises(LbevalError) as err:
            probe(server)
        url = f"{server.base_url}/chat/completions"
        assert str(err.value) == (
            f"probe request probe-chat (POST {url}) failed after 3 attempts (--retries 2); "
            "last: HTTP 503: engine loading"
        )
        # 3 attempts of the chat row, and of the cache model's prime sent beside it; nothing after them
        paths = [path for path, _ in server.requests]
        assert paths.count("/v1/chat/completions") == 3 and paths.count("/v1/completions") == 3
        assert len(paths) == 6


def _numbered_salts(monkeypatch: pytest.MonkeyPatch) -> None:
    count = iter(range(1_000_000))
    monkeypatch.setattr(probe_module, "_probe_salt", lambda: f"lbeval-probe-{next(count)}")


def test_the_probes_cache_checks_go_in_two_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the cache model can be measured, the probe's cache checks ride on its requests: five generation
    requests in three requests' time instead of six: the first probe row and the cache model's prime at once,
    the whole row alone, then the isolation request and the repeat at once. The fake holds each announced
    request until the rest of its batch has arrived; sent one after the other, the first would never return."""
    _numbered_salts(monkeypatch)
    with FakeServer(block_size=16) as server:
        probe(server)
        bodies = [body for _, body in server.requests]
    assert len(bodies) == 5
    # in either order (they are sent at once): the chat row and the raw prime
    assert sorted(("messages" in b, "prompt" in b) for b in bodies[:2]) == [(False, True), (True, False)]
    # the isolation and the repeat: the whole row under another salt, and under the hit's salt again
    hit, pair = bodies[2], bodies[3:]
    assert all(b["prompt"] == hit["prompt"] for b in pair)
    assert sorted(b["cache_salt"] == hit["cache_salt"] for b in pair) == [False, True]
    _numbered_salts(monkeypatch)  # the same salts again: the same bodies
    monkeypatch.setattr(fake_server, "BATCH_GUARD_S", 10.0)
    with FakeServer(block_size=16) as server:
        server.batch_effect = BatchEffect(window_s=None)
        server.expect_batch(bodies[:2])
        # the repeat's body is the hit's: the pair is announced once the hit has been answered (its 4th request)
        arrived = iter(range(1, 100))
        server.on_request = lambda body: server.expect_batch(bodies[3:]) if next(arrived) == 4 else None
        res = probe(server)
        res.require()
        assert server._announced == []  # both batches formed
        assert len(server.requests) == 5
        assert res.cache_model is not None and res.cache_model.source == "probe"
        assert res.cache_hit_seen and res.salt_honored and res.reset_prefix_cache
