"""The replicas scenario's unit of one input: its cold request and warm twin on every replica of the run.

For each replica r = 0..N-1 in turn:
    replicas_cold  repetition r, salt "S_r" (fresh: cold), sent to replica r
    replicas_warm  repetition r, salt "S_r" again, sent to replica r (warm there: its cold put the blocks there)
Each record's variation names the replica it was sent to (`replica`) and the N the unit was planned for
(`replicas`); the record's own RequestRecord.replica says which replica answered, and the analysis counts a
record whose two disagree as invalid. Replica r's requests are compared with replica 0's (the attribution row
"replica"). A run on one replica plans no such unit (`plan_replicas` gives no steps).
"""

from __future__ import annotations

from eval.errors import ConfigError
from eval.records import scenarios as sc
from eval.run.scenarios.base import ScenarioStep, scenario_step
from eval.run.scenarios.planners import PlanContext, Planner, register_planner
from eval.run.scenarios.settings import ScenarioSettings
from eval.run.steps import Unit

COLD, WARM = "replicas_cold", "replicas_warm"


def replica_salt(r: int) -> str:
    return f"replica{r}"


def plan_replicas(n: int, max_tokens: int | None) -> list[ScenarioStep]:
    """The unit's steps on a run of `n` replicas (none below 2)."""
    if n < 2:
        return []
    steps: list[ScenarioStep] = []
    for r in range(n):
        vary = {sc.REPLICA: r, sc.REPLICAS: n}
        for pass_name, expect in ((COLD, "miss"), (WARM, "hit")):
            steps.append(
                scenario_step(
                    pass_name, r, expect, vary, salt_key=replica_salt(r), max_tokens=max_tokens, replica=r
                )
            )
    return steps


def spans_replicas(unit: Unit) -> bool:
    """A unit whose requests go to every replica: `lbeval run` runs it beside the replicas' own units, its part on
    each in that replica's turn (eval/run/scheduler.py); `lbeval ab` pairs it after them."""
    spec = sc.SCENARIOS.get(unit.kind)
    return spec is not None and spec.spans_replicas


def _wanted(s: ScenarioSettings, replicas: int) -> bool:
    """Planned on 2+ replicas; the default plan on one replica plans nothing; named on one, refused."""
    if replicas < 2 and not s.default_plan:
        raise ConfigError(
            "--scenarios replicas needs 2 or more replicas (--base-url repeated, or a launch spec with "
            "replicas = N); this run has one"
        )
    return replicas >= 2


def _plan(ctx: PlanContext) -> list[ScenarioStep]:
    return plan_replicas(ctx.replicas, ctx.settings.max_tokens)


PLANNER = register_planner(Planner("replicas", _plan, _wanted))
