"""lbeval pipeline: data -> prompts -> requests -> records -> scores -> reports."""

__version__ = "0.1.0"
