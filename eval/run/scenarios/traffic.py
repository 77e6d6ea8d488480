"""The traffic scenario's unit of one input: cold, unrelated traffic, then warm.

traffic_cold      salt "S" (fresh: cold)
traffic_warm_idle salt "S" again, right away (warm, nothing in between): the reference of traffic_warm
traffic_noise 0   another input's prompt, fresh salt, a short output (at most 4 tokens)
traffic_noise 1   a third input's prompt, fresh salt, twice the output limit
traffic_noise 2   noise 0's prompt again, fresh salt, with a stop string taken from noise 0's output (its last
                  word), so that it ends early on a stop string
traffic_warm      salt "S" again (warm): compared with traffic_warm_idle (the traffic alone) and with
                  traffic_cold (the traffic and the prefix cache together)
"""

from __future__ import annotations

from collections.abc import Sequence

from eval.prepare.inputs import InputRow
from eval.records import scenarios as sc
from eval.run.scenarios.base import ScenarioStep, key_name, others, scenario_step
from eval.run.scenarios.planners import PlanContext, Planner, register_planner

TRAFFIC_SALT = "traffic"


def plan_traffic(
    rows: Sequence[InputRow], index: int, max_tokens: int | None, override: int | None
) -> list[ScenarioStep]:
    candidates = others(rows, index)
    a = candidates[index % len(candidates)]
    b = candidates[(index + 1) % len(candidates)]
    limit = max_tokens or override or rows[a].max_tokens
    noise = [
        (a, max(2, min(4, limit)), None),
        (b, 2 * (max_tokens or override or rows[b].max_tokens), None),
        (a, limit, ("traffic_noise", 0)),
    ]
    steps = [
        scenario_step("traffic_cold", 0, "miss", {}, salt_key=TRAFFIC_SALT, max_tokens=max_tokens),
        scenario_step("traffic_warm_idle", 0, "hit", {}, salt_key=TRAFFIC_SALT, max_tokens=max_tokens),
    ]
    for k, (row, tokens, stop_from) in enumerate(noise):
        vary = {sc.NOISE: k, sc.INPUT: key_name(rows[row])}
        steps.append(
            scenario_step(
                "traffic_noise", k, "miss", vary, prompt_row=row, max_tokens=tokens, stop_from=stop_from
            )
        )
    steps.append(scenario_step("traffic_warm", 0, "hit", {}, salt_key=TRAFFIC_SALT, max_tokens=max_tokens))
    return steps


def _plan(ctx: PlanContext) -> list[ScenarioStep]:
    return plan_traffic(ctx.rows, ctx.index, ctx.settings.max_tokens, ctx.max_tokens_override)


PLANNER = register_planner(Planner("traffic", _plan))
