"""The benchmarks: one package per benchmark, each the one folder to touch when adding or changing a benchmark.

A package (`longbench/`, `longbench_v2/`) holds what is the benchmark's and no one else's: its dataset specs
(`spec.py`), its official prompt building (`prompting.py`, the templates in prompts/), its data sources and row
validation (`sources.py`), the build of its input rows (`build.py`), the adapter from records to its pure metrics
in scorers/ (`accuracy.py`) and, for v2, its rows' own fields, figures and report tables. No stage imports a
package: `eval/benchmark_registry.py` (a base module, below every stage) is the protocol each stage reads
(typed slots, `stage_entry`), and each package's `plugin.py` fills the slots; `plugins.load_benchmarks`
registers them from the top (eval/cli.py). So this folder sits at the top with the command layer.
"""

from eval.public import public_face

# the names other packages import from this one, by the module that defines them (docs/architecture.md)
__all__, __getattr__ = public_face(
    __name__,
    {
        "plugins": ("load_benchmarks",),
    },
)
