"""The run-time half of a scenario: its planner, registered under the scenario's name.

Each scenario's runner module (eval/run/scenarios/<name>.py, the same name as its data module in
eval/records/scenario_kinds/) registers one `Planner`: `plan` gives the steps of the unit of one input from a
`PlanContext`, `wanted` says before any planning whether the run plans the scenario at all (True; False: no units,
e.g. the replicas scenario of the default plan on one replica; or it refuses with a ConfigError). plan.py imports
every runner module there is for a registered scenario and plans the units from this registry. A name is
registered once, and only the name of a registered scenario (eval/records/scenarios.SCENARIOS).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from eval.prepare.inputs import InputRow
from eval.records.cache_model import CacheModel
from eval.records.scenarios import SCENARIOS
from eval.run.scenarios.base import ScenarioStep
from eval.run.scenarios.settings import ScenarioSettings


@dataclass(frozen=True)
class PlanContext:
    """What a planner may read for the unit of input `index`."""

    settings: ScenarioSettings
    rows: Sequence[InputRow]
    index: int
    token_ids: Mapping[int, Sequence[int]]  # prompt token IDs of the scenario inputs (fetched for hitlen)
    cache_model: CacheModel | None
    max_tokens_override: int | None  # --max-tokens
    replicas: int  # the run's replicas


def always(settings: ScenarioSettings, replicas: int) -> bool:
    return True


@dataclass(frozen=True)
class Planner:
    name: str
    plan: Callable[[PlanContext], list[ScenarioStep]]
    wanted: Callable[[ScenarioSettings, int], bool] = always


_PLANNERS: dict[str, Planner] = {}


def register_planner(planner: Planner) -> Planner:
    """Add a scenario's planner; a second planner of one name, or one of no registered scenario, is refused."""
    if planner.name not in SCENARIOS:
        raise ValueError(f"planner {planner.name!r}: no scenario of that name is registered")
    if planner.name in _PLANNERS:
        raise ValueError(f"scenario {planner.name!r} has two planners")
    _PLANNERS[planner.name] = planner
    return planner


def unregister_planner(name: str) -> None:
    """Take a planner away (a test's toy scenario); KeyError when none has that name."""
    del _PLANNERS[name]


def planner_of(name: str) -> Planner:
    """The planner of a scenario; ValueError when it has none."""
    try:
        return _PLANNERS[name]
    except KeyError:
        raise ValueError(f"no planner for scenario {name!r}") from None


def planned_names() -> tuple[str, ...]:
    """The scenarios that have a planner, in the registry's order."""
    return tuple(n for n in SCENARIOS if n in _PLANNERS)
