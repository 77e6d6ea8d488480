"""Stage 1, prepare: LongBench rows (Hub, a data dir or the shipped samples) -> validated, seeded selection,
official prompts with middle truncation -> the inputs manifest, the single source of truth for what is asked.

Entry points: `build.prepare` (each dataset's rows built by its benchmark's part, `build.PREPARE_PARTS`; the
contract in `benchmark_part.py`), `inputs.read_inputs` / `inputs.InputRow` (read by the runner and by scoring).
"""
