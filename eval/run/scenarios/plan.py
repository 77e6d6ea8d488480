"""Every scenario unit of a run (after the cache scenario's), and where a scenario unit resumes.

One unit per (input, scenario), scenario by scenario in the registry's order (eval/records/scenarios.SCENARIOS),
inputs in manifest order (only the inputs `scenario_inputs` picks when `--scenario-inputs K` is given), each
scenario's steps from the planner its runner module registers (eval/run/scenarios/planners.py; this module
imports every runner module there is). The hitlen planner needs each input's prompt token IDs, read from the
server's /tokenize when the run is planned (`fetch_token_ids`, so a resumed run plans the same units from the
same tokenizer).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping, Sequence

from eval.prepare.inputs import InputRow
from eval.records.cache_model import CacheModel
from eval.records.final import select_final
from eval.records.scenarios import SCENARIOS, scenario_inputs
from eval.records.types import RequestRecord
from eval.records.vocabulary import CACHE_SCENARIO
from eval.run.passes import GroupState
from eval.run.scenarios.base import scenario_unit
from eval.run.scenarios.hitlen import fetch_token_ids
from eval.run.scenarios.planners import PlanContext, planner_of
from eval.run.scenarios.settings import ScenarioSettings
from eval.run.steps import Unit

__all__ = ["RUNNERS", "fetch_token_ids", "is_scenario_unit", "plan_scenario_units", "scenario_resume_point"]

# every runner module there is for a registered scenario (eval/run/scenarios/<name>.py registers its planner)
RUNNERS = tuple(
    f"{__package__}.{name}"
    for name in SCENARIOS
    if importlib.util.find_spec(f"{__package__}.{name}") is not None
)
for _runner in RUNNERS:
    importlib.import_module(_runner)


def is_scenario_unit(unit: Unit) -> bool:
    return unit.kind != CACHE_SCENARIO and unit.kind in SCENARIOS


def plan_scenario_units(
    s: ScenarioSettings,
    rows: Sequence[InputRow],
    *,
    token_ids: Mapping[int, Sequence[int]],
    cache_model: CacheModel | None,
    max_tokens_override: int | None,
    replicas: int = 1,
) -> list[Unit]:
    """One unit per (scenario, input), each scenario's from its registered planner (eval/run/scenarios/
    planners.py); `replicas`: the run's replica count (a planner may plan nothing on one, or refuse)."""
    chosen = scenario_inputs([r.key for r in rows], s.inputs)
    planners = [planner_of(name) for name in s.extra]
    wanted = [p for p in planners if p.wanted(s, replicas)]  # every refusal before any planning
    units: list[Unit] = []
    for p in wanted:
        for i in chosen:
            ctx = PlanContext(s, rows, i, token_ids, cache_model, max_tokens_override, replicas)
            units.append(scenario_unit(i, p.name, p.plan(ctx)))
    return units


def scenario_resume_point(
    unit: Unit, records: list[RequestRecord], same_server: bool
) -> tuple[GroupState, int] | None:
    """None when the unit is complete (every step has a final record that is not an error); else it starts
    again from its first request as the next group (its records so far stay on disk, superseded): a scenario
    unit's requests only mean something when sent back to back."""
    if not records:
        return GroupState(group=0), 0
    finals = {(s.pass_name, s.repetition): r for s, r in select_final(records).final.items()}
    done = all(
        (f := finals.get((step.pass_name, step.repetition))) is not None and f.status != "error"
        for step in unit.steps
    )
    if done:
        return None
    return GroupState(group=max(r.group for r in records) + 1), 0
