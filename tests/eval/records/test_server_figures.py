"""The cached tokens a record's cache checks read (eval/records/server_figures.checked_usage / checked_cached):
usage's, unless usage and the server's hit counter disagree on an otherwise clean window (a cache finding),
then the server's count. A table of cases; the expected values written out by hand."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from eval.records.codec import FieldError, dumps_record, record_from_dict
from eval.records.server_figures import (
    HITS_KEY,
    BatchMember,
    batch_check,
    checked_cached,
    checked_usage,
    figure_check,
)
from eval.records.types import Usage
from tests.eval.records.test_run_folder import make_record

CLEAN = {"finished": 1.0, "requests": 1.0, "prefix_cache_queries": 300.0}

CASES = [
    # (usage cached, window deltas, expected checked cached tokens, why)
    (256, {**CLEAN, HITS_KEY: 256.0}, 256, "they agree"),
    (256, {**CLEAN, HITS_KEY: 0.0}, 0, "usage claims a hit the server recomputed: the server's 0"),
    (0, {**CLEAN, HITS_KEY: 128.0}, 128, "usage hides a hit the server counted: the server's 128"),
    (256, {**CLEAN, "finished": 2.0, HITS_KEY: 0.0}, 256, "two requests in the window: no finding, usage's"),
    (256, {**CLEAN, "prefix_cache_queries": 600.0, HITS_KEY: 0.0}, 256, "another prompt's queries: usage's"),
    (256, {"finished": 1.0, "requests": 1.0}, 256, "no hit counter: usage's"),
    (256, None, 256, "no figures: usage's"),
    (None, {**CLEAN, HITS_KEY: 0.0}, None, "no cached tokens reported: no finding, none"),
]


@pytest.mark.parametrize(("cached", "deltas", "want", "why"), CASES, ids=[c[3] for c in CASES])
def test_the_checked_cached_tokens(
    cached: int | None, deltas: dict[str, float] | None, want: int | None, why: str
) -> None:
    usage = Usage(prompt_tokens=300, completion_tokens=4, cached_tokens=cached)
    finding = figure_check(deltas, usage).finding
    got = checked_usage(usage, deltas, finding)
    assert got.cached_tokens == want, why
    assert (got.prompt_tokens, got.completion_tokens) == (300, 4)
    rec = make_record(usage=usage, server_metrics=deltas, cache_finding=finding)
    assert checked_cached(rec) == want, why


def test_a_finding_the_run_dropped_leaves_usage() -> None:
    """A window the run did not trust (the request before it was foreign: no cache_finding kept) is read as
    usage says, whatever its hit delta."""
    usage = Usage(prompt_tokens=300, completion_tokens=4, cached_tokens=256)
    rec = make_record(usage=usage, server_metrics={**CLEAN, HITS_KEY: 0.0}, cache_finding=None)
    assert checked_cached(rec) == 256


# ---------------------------------------------------------------- a batch's window (batch_check)

# a batch of three sent together: prompts of 100, 200 and 300 tokens (600 queries), 4 completion tokens each
BATCH_CLEAN = {"finished": 3.0, "requests": 3.0, "prefix_cache_queries": 600.0}
PROMPTS = (100, 200, 300)

BATCH_CASES = [
    # (usage cached per member, planned per member, window deltas, want server_cached, want findings, why)
    ((96, 192, 288), (0, 0, 0), {**BATCH_CLEAN, HITS_KEY: 0.0}, (0, 0, 0), (1, 1, 1),
     "every member claims its full blocks, the server counted no hit: each 0"),
    ((96, 192, 288), (96, 0, 0), {**BATCH_CLEAN, HITS_KEY: 96.0}, (None, 0, 0), (0, 1, 1),
     "the warm member's hit is true, the fillers claim theirs: the count equals the plan, each its plan"),
    ((96, 0, 0), (96, 0, 0), {**BATCH_CLEAN, HITS_KEY: 96.0}, (None, None, None), (0, 0, 0),
     "usage agrees with the count: no finding, usage stands"),
    ((96, 192, 288), (96, 0, 0), {**BATCH_CLEAN, HITS_KEY: 192.0}, (None, None, None), (1, 0, 0),
     "a count that neither 0 nor the plan explains: the first member carries the finding, usage stands"),
    ((96, 192, 288), (96, None, 0), {**BATCH_CLEAN, HITS_KEY: 96.0}, (None, None, None), (1, 0, 0),
     "a plan not known: the count cannot be divided"),
    ((96, 192, 288), (0, 0, 0), {**BATCH_CLEAN, "finished": 4.0, HITS_KEY: 0.0}, (None, None, None), (0, 0, 0),
     "another request counted in the window: no finding, usage stands"),
    ((96, 192, 288), (0, 0, 0), {**BATCH_CLEAN, "prefix_cache_queries": 700.0, HITS_KEY: 0.0},
     (None, None, None), (0, 0, 0), "another prompt's queries: usage stands"),
    ((96, 192, 288), (0, 0, 0), BATCH_CLEAN, (None, None, None), (0, 0, 0), "no hit counter: usage stands"),
    ((96, None, 288), (0, 0, 0), {**BATCH_CLEAN, HITS_KEY: 0.0}, (None, None, None), (0, 0, 0),
     "a member reported no cached tokens: usage stands"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("claims", "plans", "deltas", "want", "findings", "why"), BATCH_CASES, ids=[c[5] for c in BATCH_CASES]
)
def test_a_batch_window_divides_the_count_only_where_it_determines_it(
    claims: tuple[int | None, ...],
    plans: tuple[int | None, ...],
    deltas: dict[str, float],
    want: tuple[int | None, ...],
    findings: tuple[int, ...],
    why: str,
) -> None:
    members = [
        BatchMember(Usage(prompt_tokens=p, completion_tokens=4, cached_tokens=c), plan)
        for p, c, plan in zip(PROMPTS, claims, plans, strict=True)
    ]
    check = batch_check(deltas, members)
    assert check.cached == want, why
    assert tuple(int(f is not None) for f in check.findings) == findings, why
    assert (check.foreign is not None) == why.startswith("another"), why
    for m, cached, finding in zip(members, check.cached, check.findings, strict=True):
        rec = make_record(usage=m.usage, server_cached=cached, cache_finding=finding)
        # checked_cached reads the server's count where it was given, else usage (no deltas on the record)
        assert checked_cached(rec) == (m.usage.cached_tokens if cached is None else cached), why


def test_a_batch_finding_names_the_claim_and_the_count() -> None:
    members = [BatchMember(Usage(100, 4, 96), 0), BatchMember(Usage(200, 4, 192), 0)]
    check = batch_check(
        {"finished": 2.0, "requests": 2.0, "prefix_cache_queries": 300.0, HITS_KEY: 0.0}, members
    )
    assert check.findings == (
        "usage reports 96 cached tokens, the server counted 0 hits over its batch of 2: 0 of them its own",
        "usage reports 192 cached tokens, the server counted 0 hits over its batch of 2: 0 of them its own",
    )
    undivided = batch_check(
        {"finished": 2.0, "requests": 2.0, "prefix_cache_queries": 300.0, HITS_KEY: 64.0}, members
    )
    assert undivided.findings == (
        "usage reports 288 cached tokens over a batch of 2, the server counted 64 hits",
        None,
    )


def test_server_cached_is_written_only_when_set_and_read_back() -> None:
    rec = make_record(usage=Usage(100, 4, 96))
    assert "server_cached" not in json.loads(dumps_record(rec))  # records without a finding are unchanged
    given = replace(rec, server_cached=0, cache_finding="usage reports 96 cached tokens, ...")
    obj = json.loads(dumps_record(given))
    assert obj["server_cached"] == 0 and record_from_dict(obj).server_cached == 0
    with pytest.raises(FieldError, match="server_cached"):
        record_from_dict({**obj, "server_cached": -1})
    with pytest.raises(FieldError, match="server_cached"):
        record_from_dict({**obj, "server_cached": "0"})
    with pytest.raises(ValueError, match="unknown field 'server_cached'"):
        old = {k: v for k, v in obj.items() if k not in ("cache_finding", "replica")}
        record_from_dict({**old, "schema_version": 2})  # a version 2 line never had it
