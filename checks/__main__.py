import sys

from checks.learner.preflight import ensure

status = ensure(sys.argv[1:])  # before anything that imports yaml, torch or triton
if status is not None:
    raise SystemExit(status)

from checks.cli import main  # noqa: E402 - only once the packages are known to be there

raise SystemExit(main())
