"""report.html's plots of each scenario that has them, one module per scenario named as the scenario
(eval/records/scenario_kinds/<name>.py) and registered under its name (`kit.register_plots`);
eval/report/attribution.py loads the module of every registered scenario that has one and draws their plots in
the registry's order. A scenario without a module has no plot of its own (its rows are in table 5).
"""

from eval.public import public_face

__all__, __getattr__ = public_face(
    __name__,
    {
        "kit": ("PlotsOf", "plots_of", "register_plots", "unregister_plots"),
    },
)
