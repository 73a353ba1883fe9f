"""Run a command and print each line of its output with the seconds since it started.

Where a check's time goes on a GPU: `python -m bench timeline python3 -m checks 10 --solution` shows
when the grading process reported its machine (start-up), each case, the interpreter stage and the timing.
"""

from __future__ import annotations

import argparse
import subprocess
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench timeline", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")
    command = parser.parse_args(argv).command
    if not command:
        parser.error("give the command to run")
    start = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(f"{time.perf_counter() - start:7.2f} | {line.rstrip()}", flush=True)
    print(f"{time.perf_counter() - start:7.2f} | exit {proc.returncode}", flush=True)
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
