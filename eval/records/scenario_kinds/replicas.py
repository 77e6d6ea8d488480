"""The replicas scenario: the same request on every replica of the variant.

Per input, on a run with N >= 2 replicas (eval/run/replicas.py): for each replica r = 0..N-1 in turn,
replicas_cold (fresh salt S_r, sent to replica r) and replicas_warm (salt S_r again, replica r: warm there);
replica r's requests are compared with replica 0's. The unit owns every replica while it runs (the replicas' own
units are done); on one replica it plans nothing. Planner: eval/run/scenarios/replicas.py.
"""

from __future__ import annotations

from eval.records.scenario_kinds.spec import PairDef, ScenarioSpec, register

# `RequestRecord.variation` keys
REPLICA = "replica"  # r of a replicas request: the replica it was sent to (RequestRecord.replica must agree)
REPLICAS = "replicas"  # N: the replicas the unit was planned for
REPLICA_ROW = "replica"  # the replicas scenario's attribution row key (sub-rows replica_r<r>)

SPEC = register(
    ScenarioSpec(
        name="replicas",
        order=50,
        default_plan=True,
        isolates="the replica: the same request on another server of the variant (device, driver, build)",
        passes=("replicas_cold", "replicas_warm"),
        units="one unit per input on a run with N >= 2 replicas: per replica r a cold request and its warm twin",
        cost="2N (N replicas); none on one replica",
        pairs=(
            PairDef(
                REPLICA_ROW,
                "replica",
                "replicas_cold",
                "replicas_cold",
                REPLICA,
                "prompt, sampling settings, cache state (cold: a fresh salt; warm: that salt again on the same "
                "replica), alone",
                "the replica: replica r's server vs replica 0's (cold vs cold, warm vs warm)",
            ),
        ),
        spans_replicas=True,
        benign=True,
    )
)
