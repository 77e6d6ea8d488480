"""The benchmarks: one package per benchmark, each the one folder to touch when adding or changing a benchmark.

A package (`longbench/`, `longbench_v2/`) holds what is the benchmark's and no one else's: its dataset specs
(`spec.py`), its official prompt building (`prompting.py`, the templates in prompts/), its data sources and row
validation (`sources.py`), the build of its input rows (`build.py`) and the adapter from records to its pure
metrics in scorers/ (`accuracy.py`). `spec` and `prompting` sit below every stage (prepare, run and analyze read
them); `sources` and `build` are prepare's part, `accuracy` analyze's (docs/architecture.md); rendering stays in
report/. `registry.py` says which benchmark a dataset belongs to; prepare and analyze map a benchmark's name
to its part (`prepare/build.PREPARE_PARTS`, `analyze/accuracy.SCORING`) and find it with `registry.stage_entry`.
"""

from eval.public import public_face

# the names other packages import from this one, by the module that defines them (docs/architecture.md)
__all__, __getattr__ = public_face(
    __name__,
    {
        "registry": (
            "BENCHMARKS",
            "benchmark_of",
            "stage_entry",
        )
    },
)
