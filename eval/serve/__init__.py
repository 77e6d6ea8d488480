"""Stage 2, serve: starting and stopping the servers under test; nothing here knows of records.

Entry points: `launch_specs.load_launch_specs` / `LaunchSpec` (TOML launch specs), `process.serving` and
`process.start` (managed server processes), `model` (the embedded CPU model); `faults/` is lbeval's vLLM
plugin. The OpenAI-compatible test double is not here: it is tests/support/fake_server.py, outside the package.
"""
