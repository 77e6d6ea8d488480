"""LongBench v1 (THUDM/LongBench): 21 datasets (and LongBench-E's `_e` names), each with its official template,
metric, output limit and chat/raw mode.

- `spec`: the dataset specs (`load_specs`, `get_spec`, `base_name`, `is_v1`) from prompts/ (`PROMPT_FILES`); its
  `lbeval datasets` listing (`listing`).
- `prompting`: pred.py's middle truncation of the formatted prompt (`middle_truncate`).
- `sources` (prepare): rows validated (file:line:field) from the Hub pin, a data dir or zip, or the mini sample.
- `build` (prepare): a row -> an input row (`build_row`), the output limit, the templates' provenance;
  `LongBenchPart`, what prepare calls (its entry in eval/prepare/benchmark_part.PREPARE_PART).
- `accuracy` (analyze): an output -> its dataset's official metric and the secondary ROUGE-L (`score_output`),
  and what analyze calls (`example_score`, `dataset_accuracy`: its entry in eval/analyze/accuracy.SCORING); the
  metrics themselves are scorers.longbench's.
- `plugin`: the benchmark as the stages see it (`BENCHMARK`: its hooks), registered by eval/benchmarks/plugins.py.
"""

from eval.public import public_face

# the names other packages import from this one, by the module that defines them (docs/architecture.md)
__all__, __getattr__ = public_face(
    __name__,
    {
        "accuracy": (
            "dataset_accuracy",
            "example_score",
        ),
        "build": ("LongBenchPart",),
        "sources": (
            "HUB_REPO",
            "HUB_REVISION",
        ),
        "spec": (
            "MODES",
            "get_spec",
            "load_specs",
        ),
    },
)
