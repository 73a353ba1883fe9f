import os
import sys

from checks import warm
from checks.engine.phases import mark
from checks.learner.preflight import ensure
from checks.verdict import STOPPED

mark("python started")  # with CHECKS_PHASES set: before torch, yaml or triton is imported

status = ensure(sys.argv[1:])  # before anything that imports yaml, torch or triton
if status is None and warm.wanted(sys.argv[1:], os.environ, sys.stdout.isatty()):
    status = warm.request(sys.argv[1:])  # None: no warm grader could take it, so grade here
if status is not None:
    raise SystemExit(status)

from checks.make_notes import make_note  # noqa: E402 - once pyyaml is known to be there
from checks.registry import RegistryError, load_puzzles, report_broken_registry  # noqa: E402

try:
    load_puzzles()  # a broken puzzles.yaml is said before torch is imported
    from checks.cli import main  # only once the packages are known to be there

    status = main()
except RegistryError as error:  # puzzles.yaml is broken: one line that says where, not a traceback
    status = report_broken_registry(error)
    if note := make_note(status):  # under make: what make's own last line means
        print(note, file=sys.stderr)
except BrokenPipeError:  # the output went to a command that stopped reading (`... | head`): nothing to add
    status = 1
except KeyboardInterrupt:  # Ctrl-C: the grading process was ended on the way out; no verdict, no traceback
    print(f"\n{STOPPED}", file=sys.stderr)
    status = 130
# The verdict is printed and recorded, and the grading processes are gone. Leave without Python's
# shutdown, which with torch's CUDA state loaded takes more than half a second on a GPU machine.
for stream in (sys.stdout, sys.stderr):
    try:
        stream.flush()
    except (BrokenPipeError, ValueError):
        pass
os._exit(status)
