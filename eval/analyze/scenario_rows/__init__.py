"""The attribution rows of each scenario that needs more than its pairs, one module per scenario, named as the
scenario (eval/records/scenario_kinds/<name>.py) and registered under its name (eval/analyze/attribution_rows.py
`register_rows`); eval/analyze/attribution.py loads every module there is for a registered scenario.
"""

from eval.public import public_face

__all__, __getattr__ = public_face(
    __name__,
    {
        "batch": ("batch_sizes",),
        "replicas": ("run_replicas",),
    },
)
