"""Stage 2, serve: starting and stopping the servers under test; nothing here knows of records.

Entry points: `launch_specs.load_launch_specs` / `LaunchSpec` (TOML launch specs), `process.serving` and
`process.start` (managed server processes), `model` (the embedded CPU model), `fake_server.FakeServer` (the
OpenAI-compatible test double for tests, bench and the docs' commands); `faults/` is lbeval's vLLM plugin.
"""
