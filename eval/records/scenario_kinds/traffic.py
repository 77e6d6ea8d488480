"""The traffic scenario: unrelated traffic between a cold request and its warm twin.

Per input: traffic_cold (fresh salt S), traffic_warm_idle (salt S: warm, nothing in between), traffic_noise
k = 0..2 (other inputs' prompts, other output lengths, the last one ending on a stop string), traffic_warm (salt
S); warm after traffic is compared with warm before it (the traffic alone) and with cold (the traffic and the
prefix cache together). Planner: eval/run/scenarios/traffic.py.
"""

from __future__ import annotations

from eval.records.scenario_kinds.spec import PairDef, ScenarioSpec, register

# `RequestRecord.variation` keys
NOISE = "noise"  # k of the traffic_noise request
STOP = "stop"  # the stop string of the traffic noise request that must end on one

TRAFFIC_NOISE = 3  # traffic_noise requests between cold and warm

SPEC = register(
    ScenarioSpec(
        name="traffic",
        order=40,
        default_plan=True,
        isolates="unrelated traffic between a cold request and its warm twin",
        passes=("traffic_cold", "traffic_warm_idle", "traffic_noise", "traffic_warm"),
        units="one unit per input: cold, warm, 3 noise requests, warm again",
        cost="6",
        pairs=(
            PairDef(
                "traffic",
                "traffic between cold and warm",
                "traffic_warm_idle",
                "traffic_warm",
                None,
                "prompt, salt, cache state (warm: the full blocks cached), alone",
                "3 unrelated requests in between (other prompts and lengths, one ending on a stop string)",
            ),
            PairDef(
                "traffic_vs_cold",
                "traffic between cold and warm",
                "traffic_cold",
                "traffic_warm",
                None,
                "prompt, salt, alone",
                "cache state (cold vs warm) and the 3 unrelated requests: includes the prefix cache's own effect",
                sub_row=True,
            ),
        ),
        rules=("traffic_invariant",),
    )
)
