"""The batch scenario's unit of one input: alone and inside batches of B, cold and warm.

    batch_alone        alone, salt "alone" (fresh: cold)
    batch_warm_alone   alone, salt "alone" again (warm)
    per B > 1, j-th:   batch 2j     batch_member (fresh salt: cold) + B-1 batch_filler (fresh salts: cold)
                       batch 2j+1   batch_warm_member (salt "alone": warm) + the same B-1 fillers, cold again
The fillers are other inputs' prompts spread over the prompt lengths (a mix), with their own output limits.
Repetitions: batch_member/batch_warm_member j (the index of B among the batch sizes above 1); batch_filler counts
the unit's fillers in send order.
"""

from __future__ import annotations

from collections.abc import Sequence

from eval.prepare.inputs import InputRow
from eval.records import scenarios as sc
from eval.run.scenarios.base import ScenarioStep, key_name, others, scenario_step, spread
from eval.run.scenarios.planners import PlanContext, Planner, register_planner

ALONE_SALT = "alone"


def plan_batch(
    rows: Sequence[InputRow], index: int, batch_sizes: Sequence[int], max_tokens: int | None
) -> list[ScenarioStep]:
    alone = {sc.BATCH_SIZE: 1, sc.SLOT: 0}
    steps = [
        scenario_step("batch_alone", 0, "miss", alone, salt_key=ALONE_SALT, max_tokens=max_tokens),
        scenario_step("batch_warm_alone", 0, "hit", alone, salt_key=ALONE_SALT, max_tokens=max_tokens),
    ]
    candidates = others(rows, index)
    filler_rep = 0
    for j, size in enumerate(b for b in batch_sizes if b > 1):
        fillers = spread(candidates, size - 1, offset=index)
        for warm in (False, True):
            batch = 2 * j + int(warm)
            member = "batch_warm_member" if warm else "batch_member"
            steps.append(
                scenario_step(
                    member, j, "hit" if warm else "miss", {sc.BATCH_SIZE: size, sc.SLOT: 0},
                    salt_key=ALONE_SALT if warm else "", batch=batch, max_tokens=max_tokens,
                )
            )  # fmt: skip
            for slot, f in enumerate(fillers, start=1):
                vary = {sc.BATCH_SIZE: size, sc.SLOT: slot, sc.INPUT: key_name(rows[f]), "warm_batch": warm}
                steps.append(
                    scenario_step(
                        "batch_filler",
                        filler_rep,
                        "miss",
                        vary,
                        prompt_row=f,
                        batch=batch,
                        max_tokens=max_tokens,
                    )
                )
                filler_rep += 1
    return steps


def _plan(ctx: PlanContext) -> list[ScenarioStep]:
    return plan_batch(ctx.rows, ctx.index, ctx.settings.batch_sizes, ctx.settings.max_tokens)


PLANNER = register_planner(Planner("batch", _plan))
