"""The scenarios beyond cache, one module each (<name>.py), and the registry they enter by name (spec.py;
registry.py loads every module of this folder). docs/scenarios.md, "Adding a scenario".
"""

from eval.public import public_face

__all__, __getattr__ = public_face(
    __name__,
    {
        "spec": ("BATCH_SIZE", "INPUT", "SLOT"),
        "parts": ("ScenarioParts", "import_scenario_modules"),
        "registry": (
            "MODULES",
            "PairDef",
            "ScenarioSpec",
            "all_pairs",
            "is_registered",
            "names",
            "pass_owner",
            "register",
            "registered",
            "spans_replicas",
            "spec_of",
            "unregister",
        ),
    },
)
