"""lbeval: LongBench accuracy and determinism of vLLM servers.

The subpackages follow the data (docs/architecture.md): prepare -> serve -> records -> run -> analyze -> gate ->
report, with commands/ and cli.py on top.
"""

__version__ = "0.1.0"
