"""Schedule, verification rules, sibling prompts, retries and resume points."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from eval.benchmarks.longbench.spec import read_prompt_file
from eval.errors import ConfigError, LbevalError
from eval.records.types import RequestRecord, Usage
from eval.run.client import Client
from eval.run.ledger import SendLedger
from eval.run.passes import GroupState, resume_point
from eval.run.request import RequestSettings, build_request
from eval.run.retry import RetryPolicy, send_with_retries
from eval.run.server_watch import ServerWatch
from eval.run.steps import (
    SIBLING_QUESTION,
    CacheFacts,
    expected_cached,
    main_steps,
    plan_units,
    sibling_prompt,
    timing_steps,
    validate_passes,
    verify,
)
from tests.eval.fake_fixtures import fake_fixture, make_row  # noqa: F401 - fixture
from tests.support.fake_server import FakeServer, Fault

ALL = ("cold", "warm", "repeat", "timing", "controls")


def test_plan_order_interleaves_timing_per_input() -> None:
    units = plan_units(2, ALL, timing_reps=2)
    names = [(u.row_index, u.kind, u.repetition, [s.pass_name for s in u.steps]) for u in units]
    main = ["cold", "warm", "repeat", "control_salt", "control_sibling"]
    timing = ["timing_cold", "timing_warm"]
    assert names == [
        (0, "main", 0, main),
        (0, "timing", 0, timing),
        (0, "timing", 1, timing),
        (1, "main", 0, main),
        (1, "timing", 0, timing),
        (1, "timing", 1, timing),
    ]
    assert all(s.max_tokens == 1 and s.stream for s in timing_steps(0))
    assert [s.salt for s in main_steps(ALL, False)] == ["fresh", "group", "group", "new", "group"]
    assert [s.expect for s in main_steps(ALL, False)] == ["miss", "hit", "hit", "miss", "sibling"]
    assert [u.kind for u in plan_units(1, ("timing",), 1)] == ["timing"]


@pytest.mark.parametrize(
    ("passes", "message"),
    [
        (("warm",), "needs cold"),
        (("cold", "repeat"), "repeat needs warm"),
        (("cold", "hot"), "unknown pass"),
        ((), "at least"),
    ],
)
def test_invalid_pass_lists(passes: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_passes(passes)


def test_expected_cached_by_hand() -> None:
    # vLLM block 128: a 1,431-token prompt caches 11 whole blocks (1,430 usable tokens)
    assert expected_cached(1431, 1431, 128) == 1408
    assert expected_cached(129, 129, 128) == 128
    assert expected_cached(128, 128, 128) == 0  # the last token is never served from cache
    assert expected_cached(1000, 300, 128) == 256  # a sibling sharing 300 tokens
    assert expected_cached(1, 1, 16) == 0


FACTS = CacheFacts(prefix_caching=True, block_size=16)


def test_verify_rules() -> None:
    assert verify("miss", Usage(79, 6, 0), FACTS) == ("ok", None, 0)
    status, reason, expected = verify("miss", Usage(79, 6, 64), FACTS)
    assert status == "invalid" and "64 tokens were cached" in str(reason) and expected == 0
    assert verify("hit", Usage(79, 6, 64), FACTS) == ("ok", None, 64)
    status, reason, expected = verify("hit", Usage(79, 6, 32), FACTS)
    assert status == "invalid" and expected == 64 and "found 32 of 64 cached tokens" in str(reason)
    assert verify("sibling", Usage(83, 1, 48), FACTS, shared_tokens=60) == ("ok", None, 48)
    assert verify("sibling", Usage(83, 1, 0), FACTS, shared_tokens=None)[0] == "invalid"
    assert verify("sibling", Usage(83, 1, 16), FACTS, shared_tokens=None) == ("ok", None, None)
    assert verify("hit", Usage(79, 6, 0), CacheFacts(False, 16)) == (
        "ok",
        None,
        0,
    )  # caching off: not checked
    assert verify("hit", Usage(79, 6, 48), CacheFacts(True, None)) == ("ok", None, None)
    assert verify("hit", Usage(79, 6, None), FACTS)[0] == "invalid"


def test_sibling_keeps_the_context_and_changes_the_question() -> None:
    template = json.loads(read_prompt_file("dataset2prompt.json"))["qasper"]
    context = "The paper studies caches. " * 20
    prompt = template.format(context=context, input="What is studied?")
    row = make_row(0, prompt=prompt)
    head = template.split("{context}")[0]
    assert sibling_prompt(row) == head + context + SIBLING_QUESTION
    gov = json.loads(read_prompt_file("dataset2prompt.json"))["gov_report"]
    row = make_row(1, dataset="gov_report", prompt=gov.format(context=context, input=""))
    assert sibling_prompt(row) == gov.split("{context}")[0] + context + SIBLING_QUESTION
    odd = make_row(2, dataset="not_a_dataset", prompt="x" * 100)
    assert sibling_prompt(odd) == "x" * 90 + SIBLING_QUESTION


def test_retry_waits_double_up_to_the_cap() -> None:
    policy = RetryPolicy(retries=5, backoff_s=0.5, max_backoff_s=3.0)
    assert [policy.wait(i) for i in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_send_with_retries(fake: FakeServer) -> None:
    req = build_request(make_row(0), RequestSettings(), model=fake.model, cache_salt=None, stream=False)
    waits: list[float] = []
    policy = RetryPolicy(retries=3, backoff_s=0.1)
    with Client(fake.base_url) as client:
        fake.add_fault(Fault("5xx", times=2))
        out = send_with_retries(client, "chat", req, policy, "ex0", sleep=waits.append)
        assert out.response is not None and out.retries == 2 and waits == [0.1, 0.2]
        fake.add_fault(Fault("5xx", times=-1, status=502, message="bad gateway"))
        out = send_with_retries(client, "chat", req, policy, "ex0", sleep=waits.append)
        assert out.response is None and out.retries == 3 and out.failure is not None
        assert "502" in out.failure.message
        fake.faults.clear()
        fake.add_fault(Fault("4xx", status=400, message="unsupported parameter zzz"))
        with pytest.raises(LbevalError, match="rejected ex0: HTTP 400: unsupported parameter zzz"):
            send_with_retries(client, "chat", req, policy, "ex0", sleep=waits.append)


def rec(
    pass_name: str, status: str = "ok", attempt: int = 0, group: int = 0, salt: str = "s0", rep: int = 0
) -> RequestRecord:
    return RequestRecord(
        run_id="r",
        variant="v",
        dataset="qasper",
        example_id="ex0",
        pass_name=pass_name,
        repetition=rep,
        attempt=attempt,
        seq=0,
        group=group,
        endpoint="chat",
        settings={},
        cache_salt=salt,
        prompt_sha256="",
        status=status,
    )


def test_resume_points() -> None:
    unit = plan_units(1, ("cold", "warm", "repeat"), 0)[0]
    assert resume_point(unit, [], same_server=True) == (GroupState(group=0), 0)
    done = [rec("cold"), rec("warm"), rec("repeat")]
    assert resume_point(unit, done, same_server=False) is None
    # interrupted after cold: continue on the same server with the cold's salt, else start over as group 1
    assert resume_point(unit, [rec("cold", salt="abc")], same_server=True) == (
        GroupState(group=0, salt="abc"),
        1,
    )
    assert resume_point(unit, [rec("cold")], same_server=False) == (GroupState(group=1), 0)
    # a warm miss whose retry was never sent is not done; nor is an error
    assert resume_point(unit, [rec("cold"), rec("warm", "invalid")], same_server=True) == (
        GroupState(group=1),
        0,
    )
    assert resume_point(unit, [*done[:2], rec("repeat", "error")], same_server=True) == (
        GroupState(group=1),
        0,
    )
    # a retried warm counts by its last attempt; an older group is superseded
    retried = [rec("cold"), rec("warm", "invalid"), rec("warm", attempt=1), rec("repeat")]
    assert resume_point(unit, retried, same_server=True) is None
    assert (
        resume_point(unit, [rec("cold", group=0), *[replace(r, group=1) for r in done]], same_server=True)
        is None
    )


class _StubMetrics:
    """Stands in for Client: /metrics says 3 finished requests, whatever happens."""

    def __init__(self) -> None:
        self.scrapes = 0
        self.ledger = SendLedger()

    def metrics_text(self) -> str:
        self.scrapes += 1
        return 'vllm:request_success_total{finished_reason="stop"} 3.0\nprocess_start_time_seconds 7.0\n'


def test_watch_waits_for_counters_then_stops_waiting_for_a_request_never_counted() -> None:
    stub = _StubMetrics()
    watch = ServerWatch(stub, metrics=True, start_time=7.0, finished=3.0, wait_s=0.05)  # type: ignore[arg-type]
    assert watch.before() is not None and stub.scrapes == 1  # already counted: no wait
    watch.request_done()  # a 4th request the server never counts
    watch.before()
    assert stub.scrapes > 2 and watch.finished == 3.0  # waited, then rebased
    before = stub.scrapes
    watch.before()
    assert stub.scrapes == before + 1  # no more waiting
    assert watch.observe(watch.scrape()) == 0 and watch.observe(None, refused=True) == 1
