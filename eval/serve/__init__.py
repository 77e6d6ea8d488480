"""Stage 2, serve: starting and stopping the servers under test; nothing here knows of records.

Entry points: `launch_specs.load_launch_specs` / `LaunchSpec` (TOML launch specs), `process.serving` and
`process.start` (managed server processes), `model` (the embedded CPU model); `faults/` is lbeval's vLLM
plugin. The OpenAI-compatible test double is not here: it is tests/support/fake_server.py, outside the package.
"""

from eval.public import public_face

# the names other packages import from this one, by the module that defines them (docs/architecture.md)
__all__, __getattr__ = public_face(
    __name__,
    {
        "cpu_features": ("fp8_kv_cache",),
        "endpoints": (
            "MAX_REPLICAS",
            "refuse_repeated_endpoints",
        ),
        "launch_specs": (
            "LaunchSpec",
            "default_cache_dir",
            "flag_int",
            "get_launch_spec",
            "spec_context_length",
            "spec_for_run",
        ),
        "numerics": (
            "declared_reason",
            "numerics_problem",
        ),
        "process": (
            "check_requirements",
            "serving",
            "sigterm_as_interrupt",
            "start",
        ),
    },
)
