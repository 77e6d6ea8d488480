"""The scenarios other than `cache` (eval/records/scenario_kinds/ describes them): settings, planning, sending.

settings.py  ScenarioSettings (`--scenarios`, `--batch-sizes`, `--repeats`, `--hit-lengths`, ...)
base.py      ScenarioStep and the helpers every scenario's planner uses
planners.py  the planners by scenario name (Planner, PlanContext, register_planner)
<name>.py    one planner per scenario, registered under the scenario's name: the unit of one input
plan.py      every scenario unit of a run (from every runner module there is), and where a unit resumes
execute.py   sending one scenario unit: alone or in batches released together, verified, recorded
"""

from eval.public import public_face

# the names other packages import from this one, by the module that defines them (docs/architecture.md)
__all__, __getattr__ = public_face(
    __name__,
    {
        "settings": (
            "ScenarioSettings",
            "batched_tokens_budget",
            "parse_ints",
        )
    },
)
