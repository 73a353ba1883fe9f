"""Every answer key imports and runs on its own, as Triton's tutorials do: a reader, an instructor or another
course's test suite imports the file by its path, with nothing put in front of it, and calls its function."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from checks.registry import ROOT, load_puzzles

# Run in a fresh interpreter, so that no module of the grader's is loaded into the keys' namespaces.
_RUN_EACH_KEY = """
import importlib.util, json, sys
import torch
from checks.engine.inputs import draw_case
from checks.puzzles import spec_module
from checks.registry import get_puzzle

results = {}
for number in sys.argv[1:]:
    puzzle = get_puzzle(number)
    spec = importlib.util.spec_from_file_location(f"key_{puzzle.label}", puzzle.solution)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        cases = [draw_case(puzzle, i)[1] for i in range(len(puzzle.cases.cpu))]
        inputs = min(cases, key=lambda c: sum(t.numel() for t in c.values() if isinstance(t, torch.Tensor)))
        outputs = getattr(module, puzzle.defines[0])(**inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        wrong = []
        for out, exp in zip(outputs, spec_module(puzzle).reference(inputs), strict=True):
            atol, rtol = puzzle.tolerance_for(exp.name)
            if not torch.allclose(out.double(), exp.value.double(), atol=atol, rtol=rtol):
                wrong.append(exp.name)
        results[number] = f"wrong {', '.join(wrong)}" if wrong else "ok"
    except Exception as exc:
        results[number] = f"{type(exc).__name__}: {exc}"
print(json.dumps(results))
"""


@pytest.mark.slow  # a fresh Python that imports torch and runs every key in the interpreter
def test_every_answer_key_imports_and_runs_alone():
    numbers = [p.number for p in load_puzzles() if p.ready and not p.needs_hopper]  # Gluon: no interpreter runs it
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _RUN_EACH_KEY, *numbers], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(results) == set(numbers)
    assert {n: r for n, r in results.items() if r != "ok"} == {}
