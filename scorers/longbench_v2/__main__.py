"""`python -m scorers.longbench_v2`: the result.py drop-in (see scorers/longbench_v2/dropin.py)."""

from scorers.longbench_v2.dropin import main

raise SystemExit(main())
