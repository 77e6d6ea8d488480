"""The repeats scenario's unit of one input: the same request N times alone, then N times in batches.

repeats_alone     repetition r = 0..N-1, one at a time, each with a fresh salt (cold)
repeats_batched   repetition r = 0..N-1, fresh salts, in ceil(N / REPEAT_BATCH) batches of near-equal size,
                  each batch's copies sent at the same moment
"""

from __future__ import annotations

from eval.records import scenarios as sc
from eval.run.scenarios.base import ScenarioStep, scenario_step
from eval.run.scenarios.planners import PlanContext, Planner, register_planner


def batch_split(n: int, most: int = sc.REPEAT_BATCH) -> list[int]:
    """Sizes of the batches N copies are sent in: as few as `most` allows, sizes differing by at most one."""
    count = -(-n // most)
    return [n // count + (1 if i < n % count else 0) for i in range(count)]


def plan_repeats(n: int, max_tokens: int | None) -> list[ScenarioStep]:
    steps = [
        scenario_step("repeats_alone", r, "miss", {sc.REPEAT: r}, max_tokens=max_tokens) for r in range(n)
    ]
    r = 0
    for b, size in enumerate(batch_split(n)):
        for _ in range(size):
            vary = {sc.REPEAT: r, sc.BATCH: b, sc.BATCH_SIZE: size}
            steps.append(scenario_step("repeats_batched", r, "miss", vary, batch=b, max_tokens=max_tokens))
            r += 1
    return steps


def _plan(ctx: PlanContext) -> list[ScenarioStep]:
    return plan_repeats(ctx.settings.repeats, ctx.settings.max_tokens)


PLANNER = register_planner(Planner("repeats", _plan))
