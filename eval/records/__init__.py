"""Stage 3, records: the run folder, the artifact every later stage reads (runs/<variant>/<run_id>/).

Entry points: `types.RequestRecord` and the other record types, `run_folder` (the one layout: `RecordWriter`,
`write_manifest` / `read_manifest`, `load_run`, `run_lock`), `final.select_final` (the one rule for which record
counts), `vocabulary` (the pass names), `scenarios` (what each scenario is, as data), `ab_pairs` (an `lbeval ab`
session's pairs, ab_pairs.jsonl).
"""
