"""Test support shared by tests/ and bench/ (never shipped: pyproject's package list names eval, scorers and
prompts only): the fake OpenAI-compatible server, `python -m tests.support.fake_server`."""
