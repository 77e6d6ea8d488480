"""Each record checked against its own run: the facts a record states about itself that its run decides.

A record that reads well on its own can still contradict the run it sits in. Each of these is damage (a copied
record, an edited field, a bad merge): `record_damage` names it as `records.jsonl:LINE:FIELD: why`, and
`run_folder.damage` adds it to the run's damage, so the run is never complete and the gate gives no verdict.

    run_id, variant   the manifest's: a record of another run copied in is foreign
    scenario          the scenario of its pass (eval/records/vocabulary.scenario_of)
    replica           below the number of replicas a session of the run served (1 without replicas), and the
                      same for every record of one unit's group (a unit runs on one replica: eval/run/replicas.py;
                      the replicas scenario's unit visits each replica in turn, and its analysis counts a record
                      answered by another replica than its variation names as invalid)
    seq               the send order: unique within the run
    attempt           a slot's attempts within a group are 0, 1, 2, ... (a retry follows the attempt before it)
    pass order        a main unit's group sends cold, warm, repeat in that order (their first attempts' seq)
    usage             a verified record of the cache scenario with status ok met its cache expectation: a
                      warm-condition record's cached tokens cover `expected_cached_tokens`, a miss-expected
                      pass's are 0 (by its own usage or by the server's count, `server_figures.checked_cached`:
                      either one standing). The other scenarios' status is not their cache check (their rules,
                      hitlen_cache_honoured, judge the hits), so their usage is not held to it

Not checked here, and why: a slot outside the plan or a planned slot left empty is `plan.completeness`; two
records of the same slot, group and attempt are `final.describe_duplicates`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from eval.records.final import slot_of, unit_of
from eval.records.manifest_parts import SessionEntry
from eval.records.scenario_kinds.registry import spans_replicas
from eval.records.server_figures import checked_cached
from eval.records.types import CACHE_VERIFIED, RequestRecord
from eval.records.vocabulary import GENERATION_PASSES, MISS_EXPECTED, RECORD_PASSES, UNIT_MAIN, scenario_of

SHOWN = 3  # problems named per kind; the rest are counted


def record_lines(records: Sequence[RequestRecord], torn: Sequence[int]) -> list[int]:
    """The 1-based line of each readable record in its file: records are read in file order, and the unreadable
    lines (`torn`) hold none."""
    skip = set(torn)
    out: list[int] = []
    line = 0
    for _ in records:
        line += 1
        while line in skip:
            line += 1
        out.append(line)
    return out


Found = tuple[int, str, str]  # (line, field, why)


def _own_run(recs: Sequence[tuple[int, RequestRecord]], run_id: str, variant: str) -> Iterator[Found]:
    for line, r in recs:
        if r.run_id != run_id:
            yield line, "run_id", f"{r.run_id!r:.60} is not this run's ({run_id}): a record of another run"
        elif r.variant != variant:
            yield line, "variant", f"{r.variant!r:.60} is not this run's ({variant}): a record of another run"
        elif r.scenario != scenario_of(r.pass_name):
            yield (
                line,
                "scenario",
                f"{r.scenario!r:.40}, but pass {r.pass_name} is {scenario_of(r.pass_name)}'s",
            )


def replica_count(sessions: Sequence[SessionEntry]) -> int:
    """The most replicas a session of the run served (each session names its replicas; 1 without)."""
    counts = [len(s.replicas) for s in sessions if s.replicas is not None]
    return max([1, *counts])


def _replicas(recs: Sequence[tuple[int, RequestRecord]], n: int) -> Iterator[Found]:
    first: dict[tuple[Any, int], RequestRecord] = {}
    for line, r in recs:
        if r.replica >= n:
            yield line, "replica", f"{r.replica}, but the run's sessions served {n} replica(s)"
            continue
        if spans_replicas(r.scenario):  # its unit visits every replica in turn (variation.replica says which)
            continue
        other = first.setdefault((unit_of(r), r.group), r)
        if other.replica != r.replica:
            yield line, "replica", f"{r.replica}, but its unit's group ran on replica {other.replica}"


def _send_order(recs: Sequence[tuple[int, RequestRecord]]) -> Iterator[Found]:
    seen: dict[int, tuple[int, RequestRecord]] = {}
    attempts: dict[tuple[Any, int], int] = {}
    firsts: dict[tuple[Any, int], dict[str, int]] = defaultdict(dict)
    for line, r in sorted(recs, key=lambda x: x[1].seq):
        if r.seq in seen:
            first, other = seen[r.seq]
            if other.key != r.key:  # the same key twice is a duplicate record (final.describe_duplicates)
                yield line, "seq", f"{r.seq} is also the seq of line {first} (one send order per run)"
            continue
        seen[r.seq] = (line, r)
        key = (slot_of(r), r.group)
        before = attempts.get(key, -1)
        if r.attempt > before + 1:
            yield line, "attempt", f"{r.attempt}, but the slot's attempts before it end at {before}"
        attempts[key] = max(before, r.attempt)
        if unit_of(r).kind == UNIT_MAIN and r.pass_name in GENERATION_PASSES:
            firsts[(unit_of(r), r.group)].setdefault(r.pass_name, line)
    for order in firsts.values():
        sent = list(order)  # first appearance by seq
        planned = [p for p in GENERATION_PASSES if p in order]
        if sent != planned:
            line = order[next(p for p, q in zip(sent, planned, strict=True) if p != q)]
            yield (
                line,
                "pass_name",
                f"its unit sent {', '.join(sent)} in that order, never {', '.join(planned)}",
            )


def usage_contradiction(r: RequestRecord) -> str | None:
    """Why a verified record's usage contradicts its status ok (None: it does not); module docstring."""
    if r.status != "ok" or r.cache_check != CACHE_VERIFIED or r.expected_cached_tokens is None:
        return None
    if r.pass_name not in RECORD_PASSES:  # a scenario's status is not its cache check (its rules judge hits)
        return None
    counts = {r.usage.cached_tokens, checked_cached(r)}
    expected = r.expected_cached_tokens
    if expected > 0 and not any(c is not None and c >= expected for c in counts):
        return f"{r.usage.cached_tokens}, but status ok says it met its {expected} expected cached tokens"
    if expected == 0 and r.pass_name in MISS_EXPECTED and 0 not in counts:
        return f"{r.usage.cached_tokens}, but status ok says this {r.pass_name} request found 0 cached tokens"
    return None


def _usage(recs: Sequence[tuple[int, RequestRecord]]) -> Iterator[Found]:
    for line, r in recs:
        why = usage_contradiction(r)
        if why is not None:
            yield line, "usage.cached_tokens", why


def record_damage(
    records: Sequence[RequestRecord],
    torn: Sequence[int],
    run_id: str,
    variant: str,
    sessions: Sequence[SessionEntry],
    name: str,
) -> list[str]:
    """One line per kind of contradiction between the records (of file `name`) and their run, naming the first
    few as FILE:LINE:FIELD (empty: none)."""
    recs = list(zip(record_lines(records, torn), records, strict=True))
    checks = (
        _own_run(recs, run_id, variant),
        _replicas(recs, replica_count(sessions)),
        _send_order(recs),
        _usage(recs),
    )
    out: list[str] = []
    for found in checks:
        items = sorted(found)
        if not items:
            continue
        shown = "; ".join(f"{name}:{line}:{fld}: {why}" for line, fld, why in items[:SHOWN])
        more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
        out.append(f"{len(items)} record(s) contradict their run: {shown}{more}")
    return out
