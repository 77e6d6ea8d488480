"""The one rule for which record counts. The runner (resume, progress, manifest stats) and every reader use it.

A run's records are grouped by unit (see `vocabulary`): an input's main unit (cold, warm, repeat, controls) and
each timing repetition. A unit re-run from cold after a server restart or an interrupted group is a new group
(g+1); the records of its older groups stay on disk but are superseded. Within the latest group, per slot
(dataset, example_id, pass_name, repetition) the last attempt counts: an invalid warm attempt 0 followed by an
ok retry (attempt 1) is a valid sample, and every invalid attempt is still counted.

Two records with the same slot, group and attempt (`RequestRecord.key`) are a duplicate: no writer produces them
(one writer per run folder, see `run_folder.run_lock`), so they are damage, reported by `select_final` in
`Selection.duplicates` and described by `describe_duplicates` for every reader.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from eval.records.types import RequestRecord
from eval.records.vocabulary import UNIT_TIMING, unit_kind


class Slot(NamedTuple):
    """One sample of a run: a complete run holds one final record per slot."""

    dataset: str
    example_id: str
    pass_name: str
    repetition: int


class UnitKey(NamedTuple):
    dataset: str
    example_id: str
    kind: str  # vocabulary.UNIT_MAIN | UNIT_TIMING
    repetition: int  # the timing repetition; 0 for main units


RecordKey = tuple[str, str, str, int, int, int]  # RequestRecord.key: slot, then attempt and group


def slot_of(rec: RequestRecord) -> Slot:
    return Slot(rec.dataset, rec.example_id, rec.pass_name, rec.repetition)


def unit_of(rec: RequestRecord) -> UnitKey:
    kind = unit_kind(rec.pass_name)
    return UnitKey(rec.dataset, rec.example_id, kind, rec.repetition if kind == UNIT_TIMING else 0)


@dataclass(frozen=True)
class Selection:
    final: dict[Slot, RequestRecord]
    invalid_attempts: dict[str, int]  # pass -> records with status invalid in counted groups (every attempt)
    recovered: dict[str, int]  # pass -> samples whose final status is ok after an invalid attempt
    superseded: int  # records of older groups of a unit (re-run after a server restart or interruption)
    # RequestRecord.key -> how many records beyond the first have that key (damage: two writers, a bad copy)
    duplicates: dict[RecordKey, int] = field(default_factory=dict)


def select_final(records: Iterable[RequestRecord]) -> Selection:
    """The record that counts for each slot; see the module docstring."""
    records = list(records)
    seen: Counter[RecordKey] = Counter(r.key for r in records)
    duplicates = {key: n - 1 for key, n in seen.items() if n > 1}
    latest_group: dict[UnitKey, int] = {}
    for r in records:
        u = unit_of(r)
        latest_group[u] = max(latest_group.get(u, r.group), r.group)
    final: dict[Slot, RequestRecord] = {}
    invalid: Counter[str] = Counter()
    had_invalid: set[Slot] = set()
    superseded = 0
    for r in records:
        if r.group != latest_group[unit_of(r)]:
            superseded += 1
            continue
        slot = slot_of(r)
        if r.status == "invalid":
            invalid[r.pass_name] += 1
            had_invalid.add(slot)
        prev = final.get(slot)
        if prev is None or (r.attempt, r.seq) > (prev.attempt, prev.seq):
            final[slot] = r
    recovered = Counter(slot.pass_name for slot in had_invalid if final[slot].status == "ok")
    return Selection(final, dict(invalid), dict(recovered), superseded, duplicates)


def describe_duplicates(sel: Selection, limit: int = 3) -> str | None:
    """One line naming the duplicated records (None when there are none)."""
    if not sel.duplicates:
        return None
    extra = sum(sel.duplicates.values())
    named = [
        f"{ds}/{ex} {p} rep {rep} attempt {attempt} group {group}"
        for (ds, ex, p, rep, attempt, group) in sorted(sel.duplicates)[:limit]
    ]
    more = f" and {len(sel.duplicates) - limit} more" if len(sel.duplicates) > limit else ""
    return (
        f"{extra} duplicate record(s) of {len(sel.duplicates)} request slot(s), "
        f"the same slot, group and attempt recorded twice (two writers?): {', '.join(named)}{more}"
    )


ExampleKey = tuple[str, str]  # (dataset, example id): `InputRow.key`


def slot(key: ExampleKey, pass_name: str, rep: int = 0) -> Slot:
    return Slot(key[0], key[1], pass_name, rep)


def ok_record(sel: Selection, key: ExampleKey, pass_name: str, rep: int = 0) -> RequestRecord | None:
    """The final record of a slot when its status is ok, else None."""
    rec = sel.final.get(slot(key, pass_name, rep))
    return rec if rec is not None and rec.status == "ok" else None
