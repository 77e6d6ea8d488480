"""Request building (pure, by dict equality), response parsing, and the client against the fake server."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpcore2
import httpx2
import pytest

from eval.records.types import ClientTimings, Usage
from eval.run import transport
from eval.run.client import DRAIN_LINES, Client, root_url
from eval.run.reply import RequestFailed
from eval.run.request import RequestSettings, build_request, request_settings, wire_body
from eval.run.wire import parse_body, parse_stream
from tests.eval.fake_fixtures import fake_fixture, make_row  # noqa: F401 - fixture
from tests.support.fake_server import FakeServer, Fault

TIMINGS = ClientTimings(sent_at=1.0, first_token_s=None, done_s=0.5)


def test_chat_request() -> None:
    row = make_row(0, max_tokens=128)
    req = build_request(row, RequestSettings(seed=7), model="m", cache_salt="salt-1", stream=False)
    assert req == {
        "model": "m",
        "messages": [{"role": "user", "content": row.prompt}],
        "temperature": 0.0,
        "top_p": 1.0,
        "seed": 7,
        "max_tokens": 128,
        "logprobs": True,
        "top_logprobs": 20,
        "stream": False,
        "extra_body": {
            "return_tokens_as_token_ids": True,
            "chat_template_kwargs": {"enable_thinking": False},
            "cache_salt": "salt-1",
        },
    }


def test_raw_request_for_samsum_streams_and_stops_at_newline_token() -> None:
    row = make_row(1, dataset="samsum", mode="raw", max_tokens=128, stop_token_ids=[198, 13])
    settings = RequestSettings(top_logprobs=5, chat_template_kwargs={"enable_thinking": True})
    req = build_request(row, settings, model="m", cache_salt=None, stream=True, max_tokens=1)
    assert req == {
        "model": "m",
        "prompt": row.prompt,
        "temperature": 0.0,
        "top_p": 1.0,
        "seed": 0,
        "max_tokens": 1,
        "logprobs": 5,
        "stream": True,
        "stream_options": {"include_usage": True},
        "extra_body": {"return_tokens_as_token_ids": True, "stop_token_ids": [198, 13], "min_tokens": 1},
    }


def test_overrides_and_no_template_kwargs() -> None:
    row = make_row(2)
    settings = RequestSettings(chat_template_kwargs=None, max_tokens_override=3)
    req = build_request(row, settings, model="m", cache_salt=None, stream=False, prompt="other text")
    assert req["messages"] == [{"role": "user", "content": "other text"}]
    assert req["max_tokens"] == 3
    assert req["extra_body"] == {"return_tokens_as_token_ids": True}
    assert "prompt_logprobs" not in wire_body(req)


def test_request_settings_drop_the_prompt_and_flatten_extra_body() -> None:
    req = build_request(make_row(0), RequestSettings(), model="m", cache_salt="s", stream=False)
    settings = request_settings(req)
    assert "messages" not in settings and "extra_body" not in settings
    assert settings["cache_salt"] == "s" and settings["return_tokens_as_token_ids"] is True
    assert settings["max_tokens"] == 6


def test_root_url() -> None:
    assert root_url("http://h:8000/v1") == "http://h:8000"
    assert root_url("http://h:8000/v1/") == "http://h:8000"
    assert root_url("http://h:8000") == "http://h:8000"


CHAT_BODY = {
    "id": "x",
    "object": "chat.completion",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hi there"},
            "logprobs": {
                "content": [
                    {
                        "token": "token_id:12",
                        "logprob": -0.25,
                        "bytes": [1, 2],
                        "top_logprobs": [
                            {"token": "token_id:12", "logprob": -0.25, "bytes": [1]},
                            {"token": "token_id:99", "logprob": -1.5, "bytes": [2]},
                        ],
                    },
                    {
                        "token": "token_id:7",
                        "logprob": -9999.0,
                        "bytes": None,
                        "top_logprobs": [{"token": "token_id:3", "logprob": -0.125, "bytes": None}],
                    },
                ]
            },
            "finish_reason": "length",
        }
    ],
    "usage": {"prompt_tokens": 300, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 256}},
}


def test_parse_chat_body() -> None:
    resp = parse_body("chat", json.dumps(CHAT_BODY).encode(), TIMINGS)
    assert resp.text == "Hi there"
    assert resp.token_ids == [12, 7]
    assert resp.finish_reason == "length"
    assert resp.usage == Usage(prompt_tokens=300, completion_tokens=2, cached_tokens=256)
    assert resp.topk is not None
    assert resp.topk.ids == [[12, 99], [3]]
    assert resp.topk.logprobs == [[-0.25, -1.5], [-0.125]]
    assert resp.topk.chosen_logprobs == [-0.25, -9999.0]
    assert resp.timings == TIMINGS


def test_parse_completions_body_with_extra_sampled_entry_and_null() -> None:
    body = {
        "choices": [
            {
                "index": 0,
                "text": "a b",
                "logprobs": {
                    "tokens": ["token_id:5", "token_id:6"],
                    "token_logprobs": [-3.0, None],
                    "top_logprobs": [{"token_id:5": -3.0, "token_id:1": -0.5, "token_id:2": -1.0}, None],
                    "text_offset": [0, 1],
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": None},
    }
    resp = parse_body("completions", json.dumps(body).encode(), TIMINGS)
    assert resp.token_ids == [5, 6]
    assert resp.topk is not None
    assert resp.topk.ids == [[5, 1, 2], []]  # server order kept, the sampled token included
    assert resp.topk.logprobs == [[-3.0, -0.5, -1.0], []]
    assert (
        resp.topk.chosen_logprobs[0] == -3.0 and resp.topk.chosen_logprobs[1] != resp.topk.chosen_logprobs[1]
    )
    assert resp.usage.cached_tokens is None


def test_parse_null_alternative_logprob_becomes_nan() -> None:
    body = json.loads(json.dumps(CHAT_BODY))
    body["choices"][0]["logprobs"]["content"][0]["top_logprobs"][1]["logprob"] = None
    resp = parse_body("chat", json.dumps(body).encode(), TIMINGS)
    assert resp.topk is not None
    first, second = resp.topk.logprobs[0]
    assert first == -0.25 and second != second  # NaN
    assert resp.topk.ids == [[12, 99], [3]]


def test_parse_rejects_tokens_that_are_not_ids() -> None:
    body = json.loads(json.dumps(CHAT_BODY))
    body["choices"][0]["logprobs"]["content"][0]["token"] = "Hi"
    with pytest.raises(RequestFailed) as err:
        parse_body("chat", json.dumps(body).encode(), TIMINGS)
    assert not err.value.retryable and "token_id" in err.value.message


def sse(*objs: object) -> Iterator[str]:
    for obj in objs:
        yield "data: " + (obj if isinstance(obj, str) else json.dumps(obj))
        yield ""


def test_parse_stream_measures_ttft_at_the_first_token() -> None:
    ticks = iter([0.25, 0.75])
    chunk = {
        "choices": [
            {
                "index": 0,
                "delta": {"content": "Hi"},
                "logprobs": {"content": [{"token": "token_id:4", "logprob": -0.5, "top_logprobs": []}]},
                "finish_reason": "length",
            }
        ]
    }
    lines = sse(
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        chunk,
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 4,
                "completion_tokens": 1,
                "prompt_tokens_details": {"cached_tokens": 0},
            },
        },
        "[DONE]",
    )
    resp = parse_stream("chat", lines, sent_at=5.0, t0=0.0, clock=lambda: next(ticks))
    assert resp.text == "Hi" and resp.token_ids == [4] and resp.finish_reason == "length"
    assert resp.timings == ClientTimings(sent_at=5.0, first_token_s=0.25, done_s=0.75)
    assert resp.usage.cached_tokens == 0


def test_parse_stream_without_done_is_a_retryable_failure() -> None:
    with pytest.raises(RequestFailed) as err:
        parse_stream("completions", sse({"choices": [{"index": 0, "text": "x"}]}), 0.0, 0.0)
    assert err.value.retryable


def test_parse_stream_error_event_keeps_the_status() -> None:
    lines = sse({"error": {"message": "context too long", "code": 400}})
    with pytest.raises(RequestFailed) as err:
        parse_stream("chat", lines, 0.0, 0.0)
    assert err.value.status == 400 and not err.value.retryable and "context too long" in err.value.message


# --- against the fake server ------------------------------------------------------------------------------------


def test_client_chat_and_completions_whole_and_streamed(fake: FakeServer) -> None:
    with Client(fake.base_url) as client:
        for mode, endpoint in (("chat", "chat"), ("raw", "completions")):
            row = make_row(0, mode=mode)
            whole = client.send(
                endpoint,
                build_request(row, RequestSettings(), model=fake.model, cache_salt="a", stream=False),
            )
            streamed = client.send(
                endpoint, build_request(row, RequestSettings(), model=fake.model, cache_salt="b", stream=True)
            )
            assert whole.token_ids == streamed.token_ids and len(whole.token_ids) == 6
            assert whole.text == streamed.text
            assert whole.topk is not None and len(whole.topk.ids[0]) == 20
            assert whole.timings.first_token_s is None and streamed.timings.first_token_s is not None
            assert whole.usage.cached_tokens == 0 and streamed.usage.cached_tokens == 0


def test_streamed_requests_keep_their_connection(fake: FakeServer) -> None:
    """A stream read to its end goes back to the pool: streamed and whole requests, chat and completions, all
    over one connection (a stream closed at data: [DONE] closed its connection and the next one connected)."""
    with Client(fake.base_url) as client:
        for salt, stream in (("a", True), ("b", True), ("c", False), ("d", True)):
            for mode, endpoint in (("chat", "chat"), ("raw", "completions")):
                row = make_row(0, mode=mode)
                req = build_request(row, RequestSettings(), model=fake.model, cache_salt=salt, stream=stream)
                assert len(client.send(endpoint, req).token_ids) == 6
    assert len(fake.requests) == 8 and fake.connections == 1


def test_draining_a_stream_is_bounded_and_never_fails_its_reply() -> None:
    """What follows data: [DONE] is read up to DRAIN_LINES lines; a failure or the deadline meanwhile is not
    the request's (its reply was whole): the connection is only closed."""
    read: list[int] = []

    def endless() -> Iterator[str]:
        n = 0
        while True:
            read.append(n)
            n += 1
            yield ""

    Client._drain(endless())
    assert len(read) == DRAIN_LINES

    def failing() -> Iterator[str]:
        yield ""
        raise RequestFailed("timed out after 1 s (whole request)", retryable=True)

    def dropped() -> Iterator[str]:
        raise httpx2.RemoteProtocolError("peer closed connection")
        yield ""

    Client._drain(failing())
    Client._drain(dropped())


def test_client_errors(fake: FakeServer) -> None:
    req = build_request(make_row(0), RequestSettings(), model=fake.model, cache_salt=None, stream=False)
    with Client(fake.base_url) as client:
        fake.add_fault(Fault("4xx", status=400, message="prompt too long for this test"))
        with pytest.raises(RequestFailed) as err:
            client.send("chat", req)
        assert err.value.status == 400 and not err.value.retryable
        assert "prompt too long for this test" in err.value.message
        fake.add_fault(Fault("5xx", status=503))
        with pytest.raises(RequestFailed) as err:
            client.send("chat", req)
        assert err.value.status == 503 and err.value.retryable
        fake.add_fault(Fault("drop", stream=True, after_chunks=3))
        with pytest.raises(RequestFailed) as err:
            client.send("chat", {**req, "stream": True, "stream_options": {"include_usage": True}})
        assert err.value.retryable and err.value.status is None
        fake.add_fault(Fault("drop", stream=False))
        with pytest.raises(RequestFailed) as err:
            client.send("chat", req)
        assert err.value.retryable
        assert client.send("chat", req).token_ids  # healthy again
    with Client("http://127.0.0.1:9/v1", timeout_s=5) as down:
        with pytest.raises(RequestFailed) as err:
            down.send("chat", req)
        assert err.value.refused and err.value.retryable


def test_a_streamed_request_answered_with_an_error_status_fails_with_its_status_and_message(
    fake: FakeServer,
) -> None:
    """Streamed requests go through the generic post too (Client._streamed): an error status is read whole and
    kept, as for a whole request; the connection is not left half-read (the next stream reuses it)."""
    req = build_request(make_row(0), RequestSettings(), model=fake.model, cache_salt=None, stream=True)
    with Client(fake.base_url) as client:
        for status, retryable in ((400, False), (503, True)):
            fake.add_fault(
                Fault("4xx" if status < 500 else "5xx", status=status, message=f"refused {status}")
            )
            with pytest.raises(RequestFailed) as err:
                client.send("chat", req)
            assert (err.value.status, err.value.retryable) == (status, retryable)
            assert f"refused {status}" in err.value.message
        assert len(client.send("chat", req).token_ids) == 6  # healthy again
    assert [body.get("stream") for _, body in fake.requests] == [True, True, True]


_TYPED_RESOURCES = """
import sys
from eval.run.client import Client
from eval.run.request import RequestSettings, build_request
from tests.eval.fake_fixtures import make_row
from tests.support.fake_server import FakeServer

with FakeServer() as fake, Client(fake.base_url) as client:
    for mode, endpoint in (("chat", "chat"), ("raw", "completions")):
        for stream in (False, True):
            req = build_request(make_row(0, mode=mode), RequestSettings(), model=fake.model, cache_salt=None,
                                stream=stream)
            assert len(client.send(endpoint, req).token_ids) == 6
print(sorted(m for m in sys.modules if m.startswith("openai.resources.")))
"""


def test_no_request_loads_a_typed_openai_resource() -> None:
    """Whole and streamed requests both go through the generic post with the wire body. The typed resources
    (client.chat.completions, client.completions) are loaded on first use: about 50 ms of imports that fell
    inside the first streamed request's timed span (its client TTFT and done_s), and their typed-parameter
    transform cost about 1 ms of client CPU on every streamed request. A fresh interpreter, so other tests'
    imports do not count."""
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run(
        [sys.executable, "-c", _TYPED_RESOURCES], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_client_sends_the_api_key() -> None:
    with FakeServer(api_key="sk-test-key") as server:
        req = build_request(make_row(0), RequestSettings(), model=server.model, cache_salt=None, stream=False)
        with Client(server.base_url, api_key="sk-test-key") as client:
            assert client.send("chat", req).token_ids
            assert client.models()[0]["id"] == server.model
        with Client(server.base_url) as client, pytest.raises(RequestFailed) as err:
            client.send("chat", req)
        assert err.value.status == 401


def test_client_side_endpoints(fake: FakeServer) -> None:
    with Client(fake.base_url) as client:
        assert client.version() == fake.version
        assert client.models()[0]["max_model_len"] == fake.max_model_len
        assert client.tokenize(fake.model, prompt="t5 t6 hello") == [
            5,
            6,
            client.tokenize(fake.model, prompt="hello")[0],
        ]
        chat = client.tokenize(fake.model, messages=[{"role": "user", "content": "t5"}])
        assert 5 in chat and len(chat) > 1
        assert client.reset_prefix_cache() is True
        assert "vllm:cache_config_info" in client.metrics_text()
    fake.reset_success = False
    with Client(fake.base_url) as client:
        assert client.reset_prefix_cache() is False
    assert replace(RequestSettings(), seed=1).seed == 1


# --- the whole-request timeout (--timeout) ----------------------------------------------------------------------


def failed_send(client: Client, req: dict[str, Any]) -> RequestFailed | None:
    try:
        client.send("chat", req)
    except RequestFailed as exc:
        return exc
    return None


# The trickles below last far longer than the timeout (40 s and more against 1-2 s) with every gap well under
# it: a per-read timeout would never fire and the request would be answered, so a failure "timed out" shows the
# deadline bounds the whole request. No clock margin is asserted: on a loaded machine the trickle only slows,
# which the deadline ends all the same. (Reads bounded by the time left, not only checked between chunks:
# test_each_read_waits_at_most_until_the_deadline_and_none_starts_after_it.)


def test_a_trickling_stream_times_out_at_the_whole_request_deadline(fake: FakeServer) -> None:
    # 103 chunks (role, 100 tokens, usage, [DONE]), one every 0.4 s: 41 s; each read waits well under 1 s
    fake.add_fault(Fault("slow", stream=True, delay_s=0.4))
    req = build_request(
        make_row(0, max_tokens=100), RequestSettings(), model=fake.model, cache_salt=None, stream=True
    )
    with Client(fake.base_url, timeout_s=1) as client:
        err = failed_send(client, req)
        assert err is not None, "a 41 s trickle with a 1 s timeout was answered"
        assert err.message == "timed out after 1 s (whole request)" and err.retryable and err.status is None
        assert client.send("chat", req).token_ids  # the next request gets a clean connection


def test_a_trickling_whole_body_times_out_at_the_whole_request_deadline(fake: FakeServer) -> None:
    fake.add_fault(Fault("slow", stream=False, delay_s=0.4, body_pieces=100))  # 40 s in pieces 0.4 s apart
    req = build_request(make_row(0), RequestSettings(), model=fake.model, cache_salt=None, stream=False)
    with Client(fake.base_url, timeout_s=1) as client:
        err = failed_send(client, req)
        assert err is not None, "a 40 s trickle with a 1 s timeout was answered"
        assert err.message == "timed out after 1 s (whole request)" and err.retryable
        assert client.send("chat", req).token_ids


def test_a_byte_just_before_each_read_timeout_does_not_extend_the_request(fake: FakeServer) -> None:
    # a chunk every 1.5 s with a 2 s timeout, 23 chunks (34 s): a per-read timeout never fires
    fake.add_fault(Fault("slow", stream=True, delay_s=1.5))
    req = build_request(
        make_row(0, max_tokens=20), RequestSettings(), model=fake.model, cache_salt=None, stream=True
    )
    with Client(fake.base_url, timeout_s=2) as client:
        err = failed_send(client, req)
    assert err is not None and err.message == "timed out after 2 s (whole request)"


class RecordingStream(httpcore2.NetworkStream):
    def __init__(self) -> None:
        self.timeouts: list[float | None] = []

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.timeouts.append(timeout)
        return b"x"


def test_each_read_waits_at_most_until_the_deadline_and_none_starts_after_it() -> None:
    inner = RecordingStream()
    stream = transport.DeadlineStream(inner)
    assert stream.read(10, timeout=600.0) == b"x" and inner.timeouts == [600.0]  # no request in flight
    with transport.request_deadline(time.monotonic() + 1.0):
        stream.read(10, timeout=600.0)
        stream.read(10, timeout=None)
        assert all(t is not None and 0 < t <= 1.0 for t in inner.timeouts[1:]) and len(inner.timeouts) == 3
        with transport.request_deadline(time.monotonic() - 0.001), pytest.raises(httpcore2.ReadTimeout):
            stream.read(10, timeout=600.0)
        assert len(inner.timeouts) == 3  # no read was started past the deadline
    assert stream.read(10, timeout=600.0) == b"x" and inner.timeouts[-1] == 600.0  # the deadline is gone
    # lines already buffered read no socket: the stream parser's iterator checks the deadline between them
    with (
        Client("http://127.0.0.1:9/v1", timeout_s=1) as client,
        pytest.raises(RequestFailed, match=r"timed out after 1 s \(whole request\)"),
    ):
        list(client._until(time.monotonic() - 0.001, iter(["data: [DONE]"])))
