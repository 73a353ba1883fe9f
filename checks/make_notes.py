"""What GNU make's own last line after a course command that did not succeed means, said by the course right above it.

`make check`, `make map` and `make profile` set CHECKS_MAKE_LEVEL to the make level running them; `checks.cli`,
`checks.learner.maps` and `bench.profile` end a failure with `make_note`, which quotes make's line as this Makefile
makes it.
"""

from __future__ import annotations

import os

from checks.registry import ROOT

# GNU make reports every recipe that exits non-zero with a line of its own after the recipe's output, and
# nothing in a Makefile turns that line off while keeping the exit status (.SILENT and -s silence only the
# recipes' echo, and an ignored error makes make exit 0): the course says what the line means instead.
UNDER_MAKE = "CHECKS_MAKE_LEVEL"  # set by the Makefile's check, map and profile targets to the make level running them
RECIPES = {  # each target's Python line
    "check": "-m checks $(PUZZLE)",
    "map": "-m checks.learner.maps $(PUZZLE)",
    "profile": "-m bench profile $(PUZZLE)",
}
FAILED = {  # what exit status 1 and 2 of each target mean
    "check": ("the check did not pass", "the command could not grade"),
    "map": ("the map was not drawn", "the map was not drawn"),
    "profile": ("the profile was not taken", "the profile was not taken"),
}


def make_line(code: int, level: str = "0", target: str = "check") -> str:
    """The line GNU make (at MAKELEVEL `level`) prints after `make <target>` ran this and it exited with `code`."""
    line = "…"
    makefile = ROOT / "Makefile"
    if makefile.exists():
        lines = makefile.read_text().splitlines()
        numbers = [i for i, text in enumerate(lines, 1) if RECIPES[target] in text]
        line = str(numbers[0]) if numbers else line
    name = "make" if level in ("", "0") else f"make[{level}]"
    return f"{name}: *** [Makefile:{line}: {target}] Error {code}"


def make_note(code: int, environ: dict[str, str] | None = None, target: str = "check") -> str:
    """The course's last line when `make <target>` ran it and it did not pass: what make's own line below means."""
    level = (environ if environ is not None else os.environ).get(UNDER_MAKE)
    if code == 0 or level is None:
        return ""
    what = FAILED[target][0] if code == 1 else FAILED[target][1]
    todo = "fix what the report above names" if code == 1 else "fix what the message above says"
    return (
        f"make adds one line of its own after this one, `{make_line(code, level, target)}`: it only repeats that "
        f"{what} (exit status {code}), not that the Makefile is broken; {todo} and run the same command again."
    )
