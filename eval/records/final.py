"""The one rule for which record counts. The runner (resume, progress, manifest stats) and every reader use it.

A run's records are grouped by unit (see `vocabulary`): an input's main unit (cold, warm, repeat, controls) and
each timing repetition. A unit re-run from cold after a server restart or an interrupted group is a new group
(g+1); the records of its older groups stay on disk but are superseded. Within the latest group, per slot
(dataset, example_id, pass_name, repetition) the last attempt counts: an invalid warm attempt 0 followed by an
ok retry (attempt 1) is a valid sample, and every invalid attempt is still counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
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


def select_final(records: Iterable[RequestRecord]) -> Selection:
    """The record that counts for each slot; see the module docstring."""
    records = list(records)
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
    return Selection(final, dict(invalid), dict(recovered), superseded)


ExampleKey = tuple[str, str]  # (dataset, example id): `InputRow.key`


def slot(key: ExampleKey, pass_name: str, rep: int = 0) -> Slot:
    return Slot(key[0], key[1], pass_name, rep)


def ok_record(sel: Selection, key: ExampleKey, pass_name: str, rep: int = 0) -> RequestRecord | None:
    """The final record of a slot when its status is ok, else None."""
    rec = sel.final.get(slot(key, pass_name, rep))
    return rec if rec is not None and rec.status == "ok" else None
