"""Stage 1, prepare: LongBench rows (Hub, a data dir or the shipped samples) -> validated, seeded selection,
official prompts with middle truncation -> the inputs manifest, the single source of truth for what is asked.

Entry points: `build.prepare` (each dataset's rows built by its benchmark's part, its entry in
`benchmark_part.PREPARE_PART`), `inputs.read_inputs` / `inputs.InputRow` (read by the runner and by scoring).
"""

from eval.public import public_face

# the names other packages import from this one, by the module that defines them (docs/architecture.md)
__all__, __getattr__ = public_face(
    __name__,
    {
        "benchmark_part": (
            "PREPARE_ARGS",
            "PREPARE_PART",
            "DatasetPart",
            "HeaderPart",
            "PrepareArgs",
            "PrepareJob",
        ),
        "build": (
            "PrepareConfig",
            "parse_max_tokens",
            "prepare",
        ),
        "data_source": (
            "DataSource",
            "Downloader",
            "hub_file",
        ),
        "inputs": (
            "HEADER_PARTS",
            "INPUT_EXTRAS",
            "ROW_CHECK",
            "ExtrasCodec",
            "V2_FIELDS_SINCE",
            "InputRow",
            "InputsHeader",
            "InputsSource",
            "InputsTemplates",
            "InputsTokenizer",
            "PartError",
            "SourceFile",
            "field_problem",
            "file_sha256",
            "inputs_digest",
            "read_inputs",
            "sha256_text",
            "unicode_problem",
            "write_inputs",
        ),
        "select": (
            "parse_n",
            "select_ids",
        ),
        "tokenizers": (
            "LocalTokenizer",
            "ServerTokenizer",
            "Tokenizer",
        ),
    },
)
