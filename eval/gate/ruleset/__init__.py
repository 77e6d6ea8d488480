"""The gate's rules, one module each (a family that shares everything, the two timing rules, shares one); each
module registers its `Rule` (eval/gate/rule.py) when eval/gate/registry.py imports it. Modules whose name starts
with "_" hold what several rules share and are not rules."""

from eval.public import public_face

# the names other packages import from this one, by the module that defines them (docs/architecture.md)
__all__, __getattr__ = public_face(
    __name__,
    {
        "cause_rows": ("remaining_pairs",),
        "timing": ("rule_cold_prefill_change", "rule_warm_prefill_change", "until_pct"),
    },
)
