"""A failing report's commands, run as printed, grade the same code: with `--earlier`, every suggested command
repeats it and `make map` takes it; the course's own files are graded but not recorded. Each test grades."""

from __future__ import annotations

import re

import pytest

from checks import cli
from checks.authoring.wrong import source_of
from checks.learner import maps, progress
from checks.registry import ROOT, get_puzzle

pytestmark = pytest.mark.slow

STEP = get_puzzle("9a")
BROKEN_STEP = source_of(STEP, STEP.wrong_dir / "no_l_rescale.edit.yaml")  # 9a without the rescale of l
COMMAND = re.compile(r"make (check|map) PUZZLE=\S+[^()]*")


@pytest.fixture
def files(tmp_path, monkeypatch):
    """Puzzle 9's answer key as the learner's file (it uses 9a's names), and a broken 9a beside it."""
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    mine = tmp_path / "p9.py"
    mine.write_text((ROOT / "solutions" / "09_flash_attention_v2_fwd.py").read_text(encoding="utf-8"))
    step = tmp_path / "my_9a.py"
    step.write_text(BROKEN_STEP, encoding="utf-8")
    return mine, step


def test_every_command_of_a_report_repeats_earlier(files, capsys):
    mine, step = files
    assert cli.main(["9", "--file", str(mine), "--earlier", str(step), "--seed", "5"]) == 1  # the broken 9a fails
    out = capsys.readouterr().out
    suggested = "\n".join(line for line in out.splitlines() if not line.startswith("Recorded in `make progress`"))
    commands = [m.group(0) for m in COMMAND.finditer(suggested)]
    assert len(commands) >= 2  # the seed and the picture at least
    for command in commands:
        if command.startswith("make check PUZZLE=9a "):  # the broken step's own check: its file, no --earlier
            assert f"FILE={step}" in command and "--earlier" not in command and "--seed 5" in command, command
            continue
        assert f"FILE={mine}" in command and f"--earlier {step}" in command, command
    assert any(command.startswith("make check PUZZLE=9a ") for command in commands), out
    assert "check(9, seed=5)" not in out  # the notebook's check would grade the notebook's 9a


def test_make_map_takes_earlier(files, tmp_path, capsys):
    mine, step = files
    png = tmp_path / "map.png"
    assert maps.main(["9", "--file", str(mine), "--earlier", str(step), "--out", str(png)]) == 0
    assert png.exists() and png.stat().st_size > 10_000


def test_a_file_under_solutions_is_graded_but_not_recorded(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    key = ROOT / "solutions" / "01_vector_add.py"
    assert cli.main(["1", "--file", str(key), "--timeout", "60"]) == 0
    out = capsys.readouterr().out
    assert "Not recorded in `make progress`: solutions/01_vector_add.py" in out
    assert not (tmp_path / "progress.json").exists()
