"""Completeness: the one definition of "every planned request has a record" (the score, the gate, the stop check).

A run is complete when every slot its plan names holds a final record, and no final record sits in a slot the
plan does not name. The plan, read from the manifest's settings and the inputs manifest:

    cache scenario   per input, the record passes of `settings.passes` (eval/records/vocabulary.PASS_CHOICES),
                     repetition 0, and timing_cold / timing_warm repetitions 0 .. timing_reps-1; a CoT input
                     (LongBench v2, `answer_template`) adds the answer call of each generation pass
    other scenarios  per input the scenario runs on (`settings.scenario_inputs`, eval/records/scenarios), each
                     scenario pass's repetitions 0 .. m-1 (a repetition is the record's index among its unit's
                     records of that pass); how many (m) depends on the server's tokenizer (hitlen) and is not
                     known offline, so a repetition is in the plan when every lower one of its pass has a record

Adaptive repetitions (`lbeval ab --timing-until`, eval/run/adaptive.py) extend the timing passes of the inputs
that have them: repetitions timing_reps .. reps_done-1, reps_done read from the session's adaptive record. Their
records are `added`, in the plan but not among its `expected_records` (the session decided them as it went);
a timing record beyond reps_done is outside the plan.

`expected_records` (the manifest) counts the plan's slots. `filled` counts the planned slots holding a final
record, so a record edited to another repetition (7 where timing_reps is 2) leaves its own slot empty and is
named in `outside`: damage, never a complete run. The manifest's figures are checked, not trusted: the cache
scenario's slots are recomputed from the settings and the inputs manifest, so a planned slot without a record
(`missing`) leaves the run incomplete whatever expected_records says, and an expected_records below them, or a
manifest that says complete with a planned slot empty (settings.timing_reps raised), is damage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from eval.records.final import ExampleKey, Selection, Slot
from eval.records.manifest_parts import RunSettings
from eval.records.scenarios import scenario_inputs
from eval.records.vocabulary import (
    ANSWER_PASSES,
    CACHE_SCENARIO,
    GENERATION_PASSES,
    PASS_CHOICES,
    SCENARIO_OF_PASS,
)

TIMING_PASSES = PASS_CHOICES["timing"]


@dataclass(frozen=True)
class Completeness:
    expected: int  # the manifest's expected_records: the plan's slots
    filled: int  # planned slots holding a final record
    outside: tuple[str, ...]  # final records in slots the plan does not name, described (damage)
    scenario_filled: int = 0  # of `filled`, the slots of scenarios other than cache
    added: int = 0  # final records of adaptive timing repetitions (module docstring), not among `filled`
    # the cache scenario's slots the settings plan (recomputed: `cache_slots`), and those without a final record
    planned: int = 0
    missing: tuple[str, ...] = ()

    @property
    def plan_size(self) -> int:
        """The plan's slots as recomputed: the manifest's expected_records, or more when the settings plan more
        cache slots than it leaves room for (the scenarios' count is known only from expected_records)."""
        return max(self.expected, self.planned + self.scenario_filled)

    @property
    def all_filled(self) -> bool:
        return self.filled >= self.expected and not self.outside and not self.missing

    def damage(self, claimed_complete: bool) -> list[str]:
        """What contradicts the plan (empty: nothing): records outside it; an expected_records below the cache
        slots the settings plan; a run that claims to be complete (`claimed_complete`: the manifest's, when
        no other damage explains it) with planned slots empty and no record outside the plan."""
        out = []
        if self.outside:
            out.append(
                f"{len(self.outside)} record(s) in a slot the run's plan does not name (edited or foreign): "
                + _named(self.outside)
            )
        if self.planned > self.expected:
            out.append(
                f"the manifest's expected_records {self.expected} is fewer than the {self.planned} requests its "
                "settings plan (settings or expected_records edited)"
            )
        if claimed_complete and self.missing and not self.outside:
            out.append(
                f"the manifest says complete, but {len(self.missing)} request(s) its settings plan have no "
                f"record: {_named(self.missing)}"
            )
        return out


def _named(slots: Sequence[str]) -> str:
    return ", ".join(slots[:3]) + (f" and {len(slots) - 3} more" if len(slots) > 3 else "")


def _describe(s: Slot) -> str:
    return f"{s.dataset}/{s.example_id} {s.pass_name} rep {s.repetition}"


def cache_slots(settings: RunSettings, keys: Sequence[ExampleKey], cot: Sequence[ExampleKey]) -> set[Slot]:
    """The cache scenario's planned slots (module docstring)."""
    choices = list(settings.passes) if settings.passes is not None else list(PASS_CHOICES)
    timing_reps = settings.timing_reps
    cot_set = set(cot)
    out: set[Slot] = set()
    for key in keys:
        for choice in choices:
            for p in PASS_CHOICES.get(choice, ()):
                if p in TIMING_PASSES:
                    out.update(Slot(key[0], key[1], p, r) for r in range(timing_reps))
                    continue
                out.add(Slot(key[0], key[1], p, 0))
                if p in GENERATION_PASSES and key in cot_set:
                    out.add(Slot(key[0], key[1], ANSWER_PASSES[p], 0))
    return out


def _scenario_keys(settings: RunSettings, keys: Sequence[ExampleKey]) -> dict[str, set[ExampleKey]]:
    """Scenario (other than cache) -> the inputs it runs on."""
    names = list(settings.scenarios) if settings.scenarios is not None else [CACHE_SCENARIO]
    chosen = {keys[i] for i in scenario_inputs(keys, settings.scenario_inputs)}
    return {name: chosen for name in names if name != CACHE_SCENARIO}


def beyond_planned_reps(settings: RunSettings, slot: Slot) -> bool:
    """A timing slot past the planned repetitions: an adaptive repetition (or, without one, outside the plan);
    never among the plan's expected_records."""
    return slot.pass_name in TIMING_PASSES and slot.repetition >= settings.timing_reps


def added_slots(settings: RunSettings, planned: set[Slot], reps_done: int) -> set[Slot]:
    """The adaptive timing repetitions' slots: repetitions timing_reps .. reps_done-1 of each timing pass that the
    plan has at repetition 0."""
    start = settings.timing_reps
    first = [s for s in planned if s.pass_name in TIMING_PASSES and s.repetition == 0]
    return {s._replace(repetition=r) for s in first for r in range(start, reps_done)}


def completeness(
    settings: RunSettings,
    expected: int,
    keys: Sequence[ExampleKey],
    cot: Sequence[ExampleKey],
    sel: Selection,
    reps_done: int = 0,
) -> Completeness:
    """Planned slots filled, and final records outside the plan (module docstring); `reps_done`: the timing
    repetitions of the session's adaptive record (0: none)."""
    planned = cache_slots(settings, keys, cot)
    added = added_slots(settings, planned, reps_done)
    by_scenario = _scenario_keys(settings, keys)
    reps: dict[tuple[str, str, str], set[int]] = {}
    for s in sel.final:
        if s.pass_name in SCENARIO_OF_PASS:
            reps.setdefault((s.dataset, s.example_id, s.pass_name), set()).add(s.repetition)
    filled, scenario_filled, n_added, outside = 0, 0, 0, []
    for s in sorted(sel.final, key=lambda x: (x.dataset, x.example_id, x.pass_name, x.repetition)):
        scenario = SCENARIO_OF_PASS.get(s.pass_name)
        if s in added:
            n_added += 1
            continue
        if scenario is None:
            ok = s in planned
        else:
            have = reps[(s.dataset, s.example_id, s.pass_name)]
            ok = (s.dataset, s.example_id) in by_scenario.get(scenario, set()) and all(
                r in have for r in range(s.repetition)
            )
        if ok:
            filled += 1
            scenario_filled += scenario is not None
        else:
            outside.append(_describe(s))
    missing = tuple(_describe(s) for s in sorted(planned - sel.final.keys()))
    return Completeness(expected, filled, tuple(outside), scenario_filled, n_added, len(planned), missing)


def planned_inputs(settings: RunSettings, keys: Sequence[ExampleKey]) -> list[ExampleKey]:
    """The inputs the plan sends anything for, in manifest order: every input when the cache scenario sends
    passes, else the inputs the other scenarios run on (`settings.scenario_inputs`)."""
    with_cache = {k for k in keys if cache_slots(settings, [k], [])}
    others = set().union(*_scenario_keys(settings, keys).values())
    return [k for k in keys if k in with_cache or k in others]


def planned_count(
    settings: RunSettings,
    keys: Sequence[ExampleKey],
    run: Sequence[ExampleKey],
    cot: Sequence[ExampleKey],
    sel: Selection,
) -> int:
    """The planned slots of the inputs `run` (of all `keys`; a stopped session's inputs run): the cache
    scenario's from the settings, the other scenarios' as recorded in the plan (their count is known only to
    the run that planned them)."""
    wanted = set(run)
    mine = replace(sel, final={s: r for s, r in sel.final.items() if (s.dataset, s.example_id) in wanted})
    cache = cache_slots(settings, [k for k in keys if k in wanted], cot)
    return len(cache) + completeness(settings, 0, keys, cot, mine).scenario_filled
