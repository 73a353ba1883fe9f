"""Every plan is recorded in one place (checks.engine.record.recorded_call.record_plan): a case's, the plan at the
largest sizes, a map's and the answer key's. The recorder is driven nowhere else, and what a call leaves (its plan,
what it raised, where it asked past the plan's limit) comes back as its callers read it."""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path

import pytest
import torch

from checks.engine.record import plan_recorder
from checks.engine.record.recorded_call import record_plan
from checks.registry import ROOT

DRIVING = {"PlanRecorder", "launches_recorded", "recorded_globals"}  # set up the recorder, record, collect


def drivers(path: Path) -> set[tuple[str, str]]:
    """(file, function) for each call in `path` that drives the plan recorder."""
    found: set[tuple[str, str]] = set()
    text = path.read_text(encoding="utf-8")
    if not any(name in text for name in (*DRIVING, ".plan(")):  # parse only what might call one
        return found
    tree = ast.parse(text)
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            collects = name == "plan" and len(node.args) == 3  # recorder.plan(returned, kind, globals)
            if name in DRIVING or collects:
                found.add((path.relative_to(ROOT).as_posix(), function.name))
    return found


def test_the_recorder_is_driven_only_by_record_plan():
    found = set().union(*(drivers(p) for folder in ("checks", "bench") for p in (ROOT / folder).rglob("*.py")))
    assert found == {
        ("checks/engine/record/recorded_call.py", "record_plan"),
        ("checks/engine/record/plan_recorder.py", "warm_up"),  # one allocation recorded before a job comes
    }


def test_record_plan_returns_the_plan_what_the_call_raised_or_where_it_asked_too_much(monkeypatch):
    x = torch.ones(4)

    def doubles(x: torch.Tensor) -> torch.Tensor:
        print("made")
        return torch.empty_like(x)

    printed = io.StringIO()
    recorded = record_plan(doubles, None, {"x": x}, {}, [], around=[contextlib.redirect_stdout(printed)])
    assert printed.getvalue() == "made\n" and recorded.raised is None and recorded.too_long is None
    assert recorded.complete() is recorded.plan and recorded.plan["ops"][0]["op"] == "alloc"

    def raises(x: torch.Tensor) -> None:
        raise KeyError("mine")

    recorded = record_plan(raises, None, {"x": x}, {}, [])
    assert recorded.plan is None and isinstance(recorded.raised, KeyError) and recorded.raised.__traceback__
    with pytest.raises(KeyError, match="mine"):
        recorded.complete()

    monkeypatch.setattr(plan_recorder, "OPS_LIMIT", 2)

    def asks_too_much(x: torch.Tensor) -> torch.Tensor:
        for _ in range(5):
            with contextlib.suppress(plan_recorder.PlanTooLong):  # caught and gone on: refused all the same
                torch.empty(2)
        return x

    recorded = record_plan(asks_too_much, None, {"x": x}, {__file__: "mine.py"}, [])
    assert recorded.plan is None and recorded.raised is None and recorded.too_long.startswith("mine.py, line ")
    with pytest.raises(plan_recorder.PlanTooLong):
        recorded.complete()
