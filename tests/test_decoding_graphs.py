"""bench/decoding_graphs.py runs only on a GPU: here, only that it imports and reads its arguments."""

from __future__ import annotations

import importlib.util

import pytest

from checks.registry import ROOT


def load():
    spec = importlib.util.spec_from_file_location("decoding_graphs", ROOT / "bench" / "decoding_graphs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_help_and_arguments(tmp_path, capsys):
    graphs = load()
    with pytest.raises(SystemExit) as exit_:
        graphs.parse_args(["--help"])
    assert exit_.value.code == 0 and "CUDA graph" in capsys.readouterr().out
    args = graphs.parse_args(["--out", str(tmp_path / "t.csv"), "--puzzles", "11,13"])
    assert args.puzzles == ["11", "13"]
    with pytest.raises(SystemExit):
        graphs.parse_args(["--out", "x.csv", "--puzzles", "14"])


def test_the_shapes_asked_for():
    shapes = load().shapes(["11", "12", "13"], quick=False)
    assert len(shapes) == 8 + 8 + 16  # B in {1, 8} x 4 lengths; 13 in two page sizes
    assert {s["H_kv"] for s in shapes if s["puzzle"] == "11"} == {32}
    assert {s["H_kv"] for s in shapes if s["puzzle"] != "11"} == {8}
    assert {s["page_size"] for s in shapes if s["puzzle"] == "13"} == {16, 64}
    assert all(s["D"] == 128 and s["H_q"] == 32 for s in shapes)
