"""The command layer: one thin module per `lbeval` subcommand (eval/cli.py only dispatches to them); each parses
its options, calls the stages and turns their results into output and an exit code.

Entry points: each module's `configure(parser)` (its options) and `run(args)` (its exit code), found by
eval/cli.py through the module's name (prepare, run, ab, score, compare, gate, serve, ...).
"""

from eval.public import public_face

# the names other packages import from this one, by the module that defines them (docs/architecture.md)
__all__, __getattr__ = public_face(
    __name__,
    {"options": ("add_specs_option",)},
)
