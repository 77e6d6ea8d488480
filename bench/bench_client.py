"""Client overhead per request and record size, against the fake server (tests/support/fake_server.py).

Measures the CPU time of the calling thread only (time.thread_time), so the fake server answering in another
thread does not count: building the request, sending it, reading and parsing the answer. Targets for a
512-token answer with top-20 logprobs: under 10 ms of client CPU per request, under 200 bytes per generated
token on disk (records.jsonl line, lossless top-k).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

from bench import smoke
from eval.prepare.inputs import InputRow, sha256_text
from eval.records.codec import decode_topk, dumps_record, encode_topk
from eval.records.types import RequestRecord
from eval.run.client import Client
from eval.run.request import RequestSettings, build_request, request_settings
from tests.support.fake_server import FakeServer

TOKENS = 512
REPS = 15


def _row(mode: str) -> InputRow:
    prompt = " ".join(f"w{i}" for i in range(2000))
    return InputRow(
        dataset="qasper" if mode == "chat" else "trec",
        id="bench",
        prompt=prompt,
        mode=mode,
        max_tokens=TOKENS,
        prompt_sha256=sha256_text(prompt),
        prompt_tokens=None,
        truncated=False,
        answers=[],
        all_classes=None,
        length=0,
    )


def _cpu_ms(fn: object, reps: int | None = None) -> tuple[float, float]:
    samples = []
    for _ in range(reps or (2 if smoke() else REPS)):
        t0 = time.thread_time()
        fn()  # type: ignore[operator]
        samples.append((time.thread_time() - t0) * 1000)
    return statistics.median(samples), min(samples)


def _record(req: dict[str, object], resp: object) -> RequestRecord:
    return RequestRecord(
        run_id="bench",
        variant="bench",
        dataset="qasper",
        example_id="bench",
        pass_name="cold",
        repetition=0,
        attempt=0,
        seq=0,
        group=0,
        endpoint="chat",
        settings=request_settings(req),
        cache_salt="lbeval-0123456789abcdef01234567",
        prompt_sha256="0" * 64,
        status="ok",
        output_text=resp.text,  # type: ignore[attr-defined]
        finish_reason=resp.finish_reason,  # type: ignore[attr-defined]
        output_token_ids=resp.token_ids,  # type: ignore[attr-defined]
        topk=resp.topk,  # type: ignore[attr-defined]
        usage=resp.usage,  # type: ignore[attr-defined]
        expected_cached_tokens=0,
        timings=resp.timings,  # type: ignore[attr-defined]
        server_metrics={"prefill_time_s": 0.5, "queue_time_s": 0.001, "ttft_s": 0.51},
    )


def main() -> None:
    settings = RequestSettings()
    with FakeServer(max_model_len=16384) as server, Client(server.base_url) as client:
        for mode, endpoint in (("chat", "chat"), ("raw", "completions")):
            row = _row(mode)
            for stream in (False, True):
                req = build_request(row, settings, model=server.model, cache_salt="bench", stream=stream)
                resp = client.send(endpoint, req)  # warm-up (and the fake's tokenization)
                assert len(resp.token_ids) == TOKENS, len(resp.token_ids)
                median, best = _cpu_ms(lambda req=req, endpoint=endpoint: client.send(endpoint, req))
                how = "streamed" if stream else "whole"
                target = " (target < 10 ms)" if not stream else ""
                print(
                    f"client CPU per request, {endpoint:11} {how:8}: median {median:5.2f} ms, "
                    f"best {best:5.2f} ms for {TOKENS} tokens x top-20{target}"
                )
        req = build_request(_row("chat"), settings, model=server.model, cache_salt="bench", stream=False)
        resp = client.send("chat", req)
    rec = _record(req, resp)
    line = dumps_record(rec)
    assert resp.topk is not None
    median, _ = _cpu_ms(lambda: dumps_record(rec))
    print(f"record encode (top-k pack + zlib + JSON line): median {median:5.2f} ms per {TOKENS}-token record")
    median, _ = _cpu_ms(lambda: decode_topk(encode_topk(resp.topk)))
    print(f"top-k encode + decode round trip: median {median:5.2f} ms")
    assert decode_topk(encode_topk(resp.topk)) == resp.topk
    topk_bytes = len(str(encode_topk(resp.topk)["data"]))
    print(
        f"bytes per generated token on disk: {len(line) / TOKENS:6.1f} (whole record line; top-k alone "
        f"{topk_bytes / TOKENS:5.1f}; target < 200)"
    )
    text_only = len(dumps_record(replace(rec, topk=None)))
    print(f"record without top-k: {text_only / TOKENS:5.1f} bytes per token")


if __name__ == "__main__":
    main()
