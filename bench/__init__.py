"""`make bench`: speed and size measurements (never timed assertions in tests)."""
