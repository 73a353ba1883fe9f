"""`make doctor` (`python -m checks.learner.doctor`): can this machine run the course? What to fix if not.

It looks at the Python packages the course needs (versions of python, torch, triton, numpy,
pyyaml, matplotlib), whether there is a CUDA GPU or kernels will run in Triton's CPU interpreter,
the known numpy/interpreter incompatibility, whether Jupyter is there for the notebooks, and
finally launches one tiny Triton kernel in a separate process with a time limit. Each problem
gets one sentence that says what to do.

Exit status: 0 when the machine is ready, 1 when something must be fixed first.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from checks import warm
from checks.engine.machine import NUMPY_PITFALL_TEXT, numpy_pitfall

OK, NOTE, PROBLEM = "ok", "note", "PROBLEM"
MIN_PYTHON = (3, 10)
KERNEL_TIMEOUT = 120.0  # seconds: a first compile on a GPU can take a while

TINY_KERNEL = """
import torch, triton, triton.language as tl

@triton.jit
def double_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=mask), mask=mask)

x = torch.arange(1000, dtype=torch.float32, device=DEVICE)
out = torch.empty_like(x)
double_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK_SIZE=256)
assert torch.equal(out, 2 * x), "wrong answer"
print("tiny kernel ok")
"""


# (module, name, what to do when it is missing); the first three must work before a kernel is launched
PACKAGES = (
    ("torch", "torch", "Install torch: `make check PUZZLE=1` sets up the course's .venv, or `pip install torch`."),
    ("triton", "triton", "Install Triton 3.6: `pip install triton==3.6.0` (or let `make check PUZZLE=1` set it up)."),
    ("numpy", "numpy", "Install numpy: `pip install 'numpy<2.4'`."),
    ("yaml", "pyyaml", "Install pyyaml: `pip install pyyaml` (the grader reads puzzles.yaml with it)."),
    ("matplotlib", "matplotlib", "Install matplotlib: `pip install matplotlib` (notebooks and pictures use it)."),
)


@dataclass
class Finding:
    level: str  # OK, NOTE or PROBLEM
    what: str  # e.g. 'torch 2.13.0'
    advice: str = ""  # for a problem: one sentence that says what to do


def _module(name: str):
    try:
        return importlib.import_module(name), None
    except Exception as exc:  # noqa: BLE001 - a broken install can raise anything on import
        return None, exc


def check_python(version: tuple[int, ...] | None = None) -> Finding:
    version = tuple(sys.version_info[:3]) if version is None else version
    text = ".".join(str(v) for v in version)
    if tuple(version[:2]) < MIN_PYTHON:
        return Finding(
            PROBLEM,
            f"python {text} ({sys.executable})",
            f"The course needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer: install a newer Python "
            "and run `make check PUZZLE=1` to set up the course's .venv with it.",
        )
    return Finding(OK, f"python {text} ({sys.executable})")


def check_package(name: str, label: str, fix: str) -> Finding:
    module, exc = _module(name)
    if module is None:
        missing = isinstance(exc, ModuleNotFoundError)
        why = "not installed" if missing else f"fails to import ({type(exc).__name__}: {exc})"
        return Finding(PROBLEM, f"{label}: {why}", fix)
    return Finding(OK, f"{label} {getattr(module, '__version__', '(version unknown)')}")


def check_device() -> tuple[Finding, bool]:
    """The GPU, or a note that kernels run in the interpreter; and whether the interpreter is used."""
    torch, _ = _module("torch")
    if torch is None:
        return Finding(NOTE, "device: unknown until torch is installed"), True
    forced = os.environ.get("TRITON_INTERPRET") == "1"
    if torch.cuda.is_available() and not forced:
        hopper = torch.cuda.get_device_capability()[0] == 9
        track = "" if hopper else "; the Hopper track (16a, 16b, 16) needs a Hopper GPU (an H100 or H200)"
        return Finding(OK, f"GPU: {torch.cuda.get_device_name()} (CUDA {torch.version.cuda}){track}"), False
    why = "TRITON_INTERPRET=1 is set" if forced else "no CUDA GPU"
    where = (
        f"{why}: kernels run in Triton's CPU interpreter (slower, small sizes, speed not graded); the Hopper track "
        "(16a, 16b, 16) needs a Hopper GPU (an H100 or H200)"
    )
    return Finding(NOTE, where), True


def check_numpy_pitfall(interpreter: bool) -> Finding | None:
    triton, _ = _module("triton")
    numpy, _ = _module("numpy")
    if triton is None or numpy is None:
        return None
    problem = numpy_pitfall(triton.__version__, numpy.__version__)
    if problem is None:
        return Finding(OK, f"numpy {numpy.__version__} works with Triton {triton.__version__}'s interpreter")
    where = "" if interpreter else " (used here for the grader's interpreter stage and --interpret)"
    return Finding(
        NOTE,
        f"numpy {numpy.__version__} breaks Triton {triton.__version__}'s own interpreter{where}; the grader and the "
        "notebooks work around it, but your own scripts run with TRITON_INTERPRET=1 need it fixed",
        problem,
    )


def check_jupyter() -> Finding:
    """Whether the notebooks can run here, and whether JupyterLab is installed or `make lab` will install it."""
    missing = [name for name in ("ipykernel", "nbformat", "IPython") if _module(name)[0] is None]
    lab = _module("jupyterlab")[0] is not None
    if missing:
        return Finding(
            NOTE,
            f"Jupyter is not installed ({', '.join(missing)} missing): `make lab` installs it, "
            "JupyterLab included, into .venv and opens the notebooks; or grade .py files with "
            "`make check PUZZLE=N FILE=answer.py`",
        )
    if lab:
        return Finding(OK, "Jupyter: JupyterLab is installed; `make lab` opens the notebooks")
    return Finding(
        NOTE,
        "Jupyter: a kernel is installed but not JupyterLab; `make lab` installs JupyterLab into "
        ".venv the first time and opens the notebooks (or open them in your editor)",
    )


def check_warm_grader() -> Finding:
    """Whether a warm grader is kept for this course (`checks.warm`), and how to stop it or turn it off."""
    if os.environ.get(warm.SWITCH) == "0":
        return Finding(OK, f"warm grader: off ({warm.SWITCH}=0): every check starts its own grader")
    if warm.running():
        return Finding(
            OK,
            "warm grader: running for this course, so a check at a terminal skips importing torch; it leaves "
            "after 15 idle minutes (`python -m checks.warm stop` stops it now)",
        )
    return Finding(OK, "warm grader: none running; the next `make check` at a terminal starts one")


def check_seal() -> Finding:
    """Whether the kernel seals the process that runs the learner's code (Landlock), and why not."""
    from checks.engine.processes import landlock

    reason = landlock.unsealed_reason()
    if reason:
        return Finding(NOTE, f"seal: {reason} Checks still grade; on a Linux kernel 5.13 or newer they are sealed")
    return Finding(OK, f"seal: the kernel's Landlock (ABI {landlock.abi()}) seals the process that runs your code")


def check_registry() -> Finding:
    try:
        from checks.registry import load_puzzles

        puzzles = load_puzzles()
    except Exception as exc:  # noqa: BLE001
        return Finding(
            PROBLEM,
            f"puzzles.yaml cannot be read ({type(exc).__name__}: {exc})",
            "Restore puzzles.yaml from git (`git checkout puzzles.yaml`), then run the doctor again.",
        )
    ready = sum(p.ready for p in puzzles)
    return Finding(OK, f"puzzles.yaml: {len(puzzles)} puzzles, {ready} ready")


def check_kernel(interpreter: bool, timeout: float = KERNEL_TIMEOUT, code: str = TINY_KERNEL) -> Finding:
    """Launch a tiny kernel in a child process; a crash or a hang becomes a finding."""
    env = dict(os.environ)
    if interpreter:
        env["TRITON_INTERPRET"] = "1"
    where = "in the interpreter" if interpreter else "on the GPU"
    program = f"DEVICE = {'cpu' if interpreter else 'cuda'!r}\n" + code
    start = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="checks-doctor-") as folder:
            script = Path(folder) / "tiny_kernel.py"  # a compiled @triton.jit needs its source in a file
            script.write_text(program, encoding="utf-8")
            proc = subprocess.run(
                [sys.executable, str(script)],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
    except subprocess.TimeoutExpired:
        return Finding(
            PROBLEM,
            f"a tiny kernel did not finish {where} within {timeout:g} s",
            "Something blocks Triton (a busy GPU or a stuck compile cache): close other GPU jobs, "
            "delete ~/.triton/cache, and run the doctor again.",
        )
    seconds = time.monotonic() - start
    if proc.returncode == 0 and "tiny kernel ok" in proc.stdout:
        return Finding(OK, f"a tiny Triton kernel ran {where} and gave the right answer ({seconds:.1f} s)")
    output = (proc.stderr or proc.stdout).strip().splitlines()
    last = output[-1] if output else f"exit code {proc.returncode}"
    if NUMPY_PITFALL_TEXT in proc.stderr:
        advice = (
            "Install an older numpy with `pip install 'numpy<2.4'` (or use the course's .venv), "
            "then run the doctor again."
        )
    elif proc.returncode < 0:
        advice = (
            f"The process died (signal {-proc.returncode}): reinstall torch and triton in matching versions "
            "(`make env` sets up a .venv that works), then run the doctor again."
        )
    else:
        advice = (
            f"Read the error above ({last[:200]}): usually torch and triton do not match; `make env` sets up "
            "a .venv with versions that work together."
        )
    return Finding(PROBLEM, f"a tiny Triton kernel failed {where}: {last[:200]}", advice)


def examine(kernel_timeout: float = KERNEL_TIMEOUT) -> list[Finding]:
    """Every finding, in the order they are printed."""
    found = [check_python()]
    for module, label, fix in PACKAGES:
        found.append(check_package(module, label, fix))
    device, interpreter = check_device()
    found.append(device)
    pitfall = check_numpy_pitfall(interpreter)
    if pitfall:
        found.append(pitfall)
    found.append(check_jupyter())
    found.append(check_warm_grader())
    found.append(check_seal())
    found.append(check_registry())
    if all(f.level != PROBLEM for f in found[1:4]) and (pitfall is None or pitfall.level != PROBLEM):
        found.append(check_kernel(interpreter, kernel_timeout))
    else:
        found.append(Finding(NOTE, "no tiny kernel launched: fix the problems above first"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks.learner.doctor", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--timeout", type=float, default=KERNEL_TIMEOUT, help="seconds for the tiny kernel (default 120)"
    )
    args = parser.parse_args(argv)
    print("Checking this machine for the Triton course:", flush=True)
    found = examine(args.timeout)
    for f in found:
        print(f"  {f.level:<7} {f.what}")
    problems = [f for f in found if f.level == PROBLEM]
    print()
    if not problems:
        print("Healthy: this machine can run the course. Start with notebooks/00_setup.ipynb or `make check PUZZLE=1`.")
        return 0
    print(f"{len(problems)} problem(s) to fix:")
    for f in problems:
        print(f"  - {f.advice}")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
