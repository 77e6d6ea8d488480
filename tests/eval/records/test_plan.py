"""eval/records/plan.py: the planned slots of a run, counted by hand here, and what lies outside them."""

from __future__ import annotations

from eval.records.final import Selection, Slot
from eval.records.manifest_parts import RunSettings
from eval.records.plan import cache_slots, completeness, planned_count, planned_inputs
from eval.records.types import RequestRecord

KEYS = [("qasper", "a"), ("qasper", "b"), ("gov_report", "c")]
SETTINGS = RunSettings(passes=["cold", "warm", "repeat", "timing", "controls"], timing_reps=2)


def _rec(ex: str, pass_name: str, rep: int, ds: str = "qasper") -> RequestRecord:
    return RequestRecord(
        run_id="r", variant="v", dataset=ds, example_id=ex, pass_name=pass_name, repetition=rep, attempt=0,
        seq=0, group=0, endpoint="chat", settings={}, cache_salt=None, prompt_sha256="x", status="ok",
    )  # fmt: skip


def _sel(recs: list[RequestRecord]) -> Selection:
    return Selection({Slot(r.dataset, r.example_id, r.pass_name, r.repetition): r for r in recs}, {}, {}, 0)


def test_cache_slots_count_passes_timing_reps_and_cot_answer_calls() -> None:
    # per input: cold, warm, repeat, control_salt, control_sibling (5) + 2 x (timing_cold, timing_warm) (4) = 9;
    # the CoT input adds cold_answer, warm_answer, repeat_answer (3)
    assert len(cache_slots(SETTINGS, KEYS, [])) == 27
    assert len(cache_slots(SETTINGS, KEYS, [KEYS[2]])) == 30
    assert Slot("qasper", "a", "timing_warm", 1) in cache_slots(SETTINGS, KEYS, [])
    assert Slot("qasper", "a", "timing_warm", 2) not in cache_slots(SETTINGS, KEYS, [])


def test_scenario_repetitions_are_planned_when_contiguous_and_on_a_scenario_input() -> None:
    settings = RunSettings(passes=["cold"], scenarios=["cache", "repeats"], scenario_inputs=2)
    # scenario_inputs 2, round robin over datasets: qasper/a and gov_report/c (not qasper/b)
    assert planned_inputs(RunSettings(passes=[], scenarios=["repeats"], scenario_inputs=2), KEYS) == [
        KEYS[0],
        KEYS[2],
    ]
    recs = [_rec("a", "cold", 0), _rec("a", "repeats_alone", 0), _rec("a", "repeats_alone", 1),
            _rec("a", "repeats_alone", 3), _rec("b", "repeats_alone", 0), _rec("a", "cold", 1)]  # fmt: skip
    c = completeness(settings, 4, KEYS, [], _sel(recs))
    assert c.filled == 3 and c.scenario_filled == 2 and not c.all_filled
    assert c.outside == (
        "qasper/a cold rep 1",
        "qasper/a repeats_alone rep 3",
        "qasper/b repeats_alone rep 0",
    )
    assert planned_count(settings, KEYS, [KEYS[0]], [], _sel(recs)) == 1 + 2
