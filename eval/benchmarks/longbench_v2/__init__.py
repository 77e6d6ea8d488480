"""LongBench v2 (THUDM/LongBench-v2): one dataset, `longbench_v2`, multiple choice A-D, asked in three modes.

- `spec`: the modes (`V2_MODES`, `get_v2_mode`), the dataset name and metric, the prompt files it names, its
  `lbeval prepare` option (`PREPARE_ARGS`) and its `lbeval datasets` listing (`listing`).
- `prompting`: the official templates filled as pred.py does, pred.py's middle truncation of token ids.
- `sources` (prepare): `data.json` rows validated (file:line:field), the Hub pin, hub | data dir | mini.
- `build` (prepare): rows -> input rows (`prepare_v2`): template, truncation, the CoT answer call's template;
  `LongBenchV2Part`, what prepare calls (its entry in eval/prepare/benchmark_part.PREPARE_PART).
- `inputs` (prepare): the check of a v2 row's own fields when a manifest is read (eval/prepare/inputs.ROW_CHECK).
- `accuracy` (analyze): records -> the official and lbeval figures (`v2_item`, `v2_pass_accuracy`), and what
  analyze calls (`example_score`, `dataset_accuracy`: its entry in eval/analyze/accuracy.SCORING); the
  extraction and the figures themselves are scorers.longbench_v2's.
- `figures`: one pass's figures (`V2PassAccuracy`, `V2_BUCKETS`) and a dataset's (`V2Accuracy`, the extras of
  analyze's DatasetAccuracy; `v2_figures` reads them).
- `report` (report): the v2 tables of scores.md and of the report, as cells (eval/report/benchmark_tables.py).
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
        "build": (
            "NAME",
            "LongBenchV2Part",
        ),
        "figures": (
            "V2PassAccuracy",
            "V2_BUCKETS",
        ),
        "prompting": ("COT_PLACEHOLDER",),
        "spec": (
            "DEFAULT_V2_MODE",
            "V2_CHAT_MODE",
            "V2_DATASET",
            "V2_METRIC",
            "V2_MODES",
            "V2Options",
        ),
    },
)
