"""The cached tokens a record's cache checks read (eval/records/server_figures.checked_usage / checked_cached):
usage's, unless usage and the server's hit counter disagree on an otherwise clean window (a cache finding),
then the server's count. A table of cases; the expected values written out by hand."""

from __future__ import annotations

import pytest

from eval.records.server_figures import HITS_KEY, checked_cached, checked_usage, figure_check
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
