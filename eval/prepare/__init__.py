"""Stage 1, prepare: LongBench rows (Hub, a data dir or the shipped samples) -> validated, seeded selection,
official prompts with middle truncation -> the inputs manifest, the single source of truth for what is asked.

Entry points: `build.prepare` (and `build_v2` for LongBench v2), `inputs.read_inputs` / `inputs.InputRow` (read
by the runner and by scoring), `dataset_specs.get_spec`.
"""
