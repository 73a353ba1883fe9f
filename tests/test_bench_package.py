"""bench/ as a package: one entry point (`python -m bench COMMAND`), no file that patches the import path or is a shell
script, and the GPU recipe (`python -m bench gpu-run`) planned and described without a GPU."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import gpu_run
from bench.__main__ import COMMANDS
from checks.bench_results import gpu_slug, run_folder_name
from checks.registry import ROOT

BENCH = ROOT / "bench"
PATH_PATCH = re.compile(r"\bsys\.path\s*(\.\s*(insert|append|extend)\b|\[|\+?=)|\bsite\.addsitedir\b|PYTHONPATH=")


def path_patches(text: str) -> list[str]:
    """The lines of a file that change Python's import path (sys.path, site.addsitedir, PYTHONPATH=...)."""
    return [line.strip() for line in text.splitlines() if PATH_PATCH.search(line)]


def test_the_finder_finds_a_path_patch():
    assert path_patches("import sys\nsys.path.insert(0, str(ROOT))\n") == ["sys.path.insert(0, str(ROOT))"]
    assert path_patches("sys.path[:0] = [here]\nsys.path += extra\nsite.addsitedir(x)\n") != []
    assert path_patches("Usage: `PYTHONPATH=. python3 bench/x.py`") != []
    assert path_patches("print(sys.version)\nfrom bench.gpu_run import main\n") == []


def test_no_file_under_bench_patches_the_import_path():
    files = [p for p in BENCH.rglob("*") if p.is_file() and p.suffix in (".py", ".sh", ".md") and "results" not in
             p.relative_to(BENCH).parts]  # fmt: skip
    assert len(files) >= 10, files
    found = {str(p.relative_to(ROOT)): path_patches(p.read_text(encoding="utf-8")) for p in files}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_no_shell_scripts_in_bench():
    assert sorted(str(p.relative_to(ROOT)) for p in BENCH.rglob("*.sh")) == []


def test_every_tool_is_a_command_with_a_main():
    """Every module of bench/ with a `main` is reachable as a command, and every command's module has one."""
    with_main = set()
    for path in BENCH.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body):
            with_main.add(f"bench.{path.stem}")
    assert with_main - {"bench.__main__"} == {module for module, _ in COMMANDS.values()}


def test_help_lists_every_command():
    done = subprocess.run([sys.executable, "-m", "bench", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    listed = re.findall(r"^    (\S+)", done.stdout, flags=re.M)
    assert listed == list(COMMANDS)
    for _, what in COMMANDS.values():
        assert what and "\n" not in what


def test_a_command_gets_its_own_arguments(capsys):
    from bench.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["phases"])  # the tool's own parser: it needs a file
    assert exit_.value.code == 2 and "usage: python -m bench phases" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["no-such-command"])


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_answers_help_with_its_own_usage(command, capsys):
    """`python -m bench COMMAND --help` is the tool's own help (nothing is run), under the name it is called by."""
    from bench.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m bench {command} ")


def test_shards_and_puzzles_are_read():
    assert gpu_run.parse_shards("1 2 3|6 7 8a, 8 |11") == [["1", "2", "3"], ["6", "7", "8a", "8"], ["11"]]
    assert gpu_run.parse_puzzles("1,9, 11") == ["1", "9", "11"]
    with pytest.raises(ValueError, match="empty shard"):
        gpu_run.parse_shards("1 2||3")


def test_the_plan_gives_each_shard_a_gpu_and_runs_the_rest_alone(tmp_path):
    plan = gpu_run.plan_run([["1", "2"], ["9"]], tmp_path, also=["decoding-graphs --out {out}/g.csv"], tampering=True,
                            latency=["1", "9"], python="python")  # fmt: skip
    assert [(s.gpu, s.log) for s in plan.together] == [(0, "solutions-0.log"), (1, "solutions-1.log"),
                                                       (2, "also-0-decoding-graphs.txt")]  # fmt: skip
    assert plan.together[0].argv == ("python", "-m", "checks.instructor.solutions", "--puzzle", "1", "--puzzle", "2",
                                     "--jobs", "12", "--out", str(tmp_path / "solutions-0.md"))  # fmt: skip
    assert plan.together[2].argv == ("python", "-m", "bench", "decoding-graphs", "--out", f"{tmp_path}/g.csv")
    assert [s.name for s in plan.after] == ["tampering", "latency", "phases"]
    assert plan.after[0].argv[-2:] == ("bench", "tampering") and plan.after[0].gpu == 0
    assert plan.after[1].argv[-3:] == (str(gpu_run.ROOT), "1", "9")
    assert plan.after[1].env == {"CHECKS_PHASES": str(tmp_path / "phases.log")}
    assert gpu_run.plan_run([], tmp_path) == gpu_run.Plan((), ())
    line = plan.together[0].shell(tmp_path)
    assert line.startswith("CUDA_VISIBLE_DEVICES=0 timeout 540 python -m checks.instructor.solutions --puzzle 1")
    assert line.endswith(f"> {tmp_path / 'solutions-0.log'} 2>&1")


@pytest.mark.parametrize(
    ("name", "slug"),
    [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"), ("NVIDIA A100-SXM4-80GB", "a100"),
     ("NVIDIA GeForce RTX 4090", "nvidia-geforce-rtx-4090"), ("no-gpu", "no-gpu")],
)  # fmt: skip
def test_a_gpu_names_its_folder(name, slug):
    assert gpu_slug(name) == slug


def test_a_taken_folder_name_gets_a_letter():
    assert run_folder_name("2026-11-28", "NVIDIA H200") == "2026-11-28-h200"
    taken = {"2026-11-28-h200", "2026-11-28-h200-b"}
    assert run_folder_name("2026-11-28", "NVIDIA H200", taken=taken) == "2026-11-28-h200-c"
    assert run_folder_name("2026-11-28", "NVIDIA H200", "make-bench") == "2026-11-28-h200-make-bench"


def test_the_readme_says_what_made_the_run(tmp_path):
    plan = gpu_run.plan_run([["1"]], gpu_run.ROOT / "bench" / "results" / "x", tampering=True, python="python")
    gpus, versions = ["NVIDIA H200, 580.159.04"] * 2, {"python": "3.12.3", "torch": "2.11.0"}
    text = gpu_run.run_readme("python -m bench gpu-run --shards 1 --tampering", "abc1234", "2026-11-28", gpus, versions,
                              plan)  # fmt: skip
    assert text.startswith("# 2026-11-28: NVIDIA H200, 580.159.04\n")
    for said in ("- command: `python -m bench gpu-run --shards 1 --tampering`", "- commit: abc1234",
                 "- GPUs: 2 (NVIDIA H200, 580.159.04; NVIDIA H200, 580.159.04)",
                 "- versions: python 3.12.3, torch 2.11.0",
                 "| `solutions-0.log` | shard 0 (1) | 0 | `python -m checks.instructor.solutions --puzzle 1 --jobs 12 "
                 "--out bench/results/x/solutions-0.md` |", "| `tampering.txt` | tampering | 0 |"):  # fmt: skip
        assert said in text, said
    assert str(gpu_run.ROOT) not in text


def test_a_dry_run_prints_the_steps_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    assert gpu_run.main(["--shards", "1 2|3", "--latency", "1", "--out", str(out), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "CUDA_VISIBLE_DEVICES=1 timeout 540" in printed and "--puzzle 3" in printed
    assert "bench wall-times" in printed and "# " + str(out / "README.md") in printed
    assert not out.exists()


def test_a_run_with_nothing_to_do_or_too_few_gpus_is_refused(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit):
        gpu_run.main(["--dry-run"])
    monkeypatch.setattr(gpu_run, "describe_machine", lambda: (["NVIDIA H200, 580.159.04"], {"python": "3"}))
    with pytest.raises(SystemExit):
        gpu_run.main(["--shards", "1|2", "--out", str(tmp_path / "run")])
    assert "2 shards and --also commands, one GPU each, but 1 GPU(s) here" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_run_executes_its_steps_and_notes_each_one(tmp_path):
    """execute() on two tiny steps (Python itself, no GPU): both logs written, shards.txt says each exit status."""
    ok = gpu_run.Step("ok", (sys.executable, "-c", "print('hello')"), "ok.txt", None, 30.0)
    bad = gpu_run.Step("bad", (sys.executable, "-c", "raise SystemExit(3)"), "bad.txt", 0, 30.0)
    assert gpu_run.execute(gpu_run.Plan((ok,), (bad,)), tmp_path) == 1
    assert (tmp_path / "ok.txt").read_text() == "hello\n"
    lines = (tmp_path / "shards.txt").read_text().splitlines()
    assert [line.split(",")[0] for line in lines] == ["ok: rc=0", "bad: rc=3"]
    assert gpu_run.execute(gpu_run.Plan((ok,), ()), tmp_path) == 0


def test_the_folders_of_results_each_say_what_made_them():
    """Every run folder of bench/results/ has a README that names its GPU (or says it ran on a CPU) and a date."""
    folders = sorted(p for p in (BENCH / "results").iterdir() if p.is_dir())
    assert len(folders) >= 10
    for folder in folders:
        assert re.match(r"\d{4}-\d{2}-\d{2}-(h100|h200|cpu)\b", folder.name), folder.name
        readme = folder / "README.md"
        assert readme.exists(), f"{folder.relative_to(ROOT)} has no README.md"
        text = readme.read_text(encoding="utf-8")
        assert folder.name[:10] in text or "provenance" in text.lower(), folder.name


def test_bench_path_is_importable_only_as_a_package():
    assert Path(gpu_run.__file__).parent == BENCH and (BENCH / "__init__.py").exists()


def test_a_prefill_baseline_out_of_gpu_memory_is_a_row_not_the_end_of_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The padded and gathered baselines materialise copies that outgrow an H100 at the skewed lengths: their row says
    so, the run goes on, and the record's figures leave the missing time out."""
    import torch

    from bench import prefill

    def out_of_memory(fn: object, capture: bool = True) -> tuple[float, str]:
        assert capture is False, "a baseline known not to capture must not try a CUDA graph (its pool stays)"
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(prefill, "timed", out_of_memory)
    monkeypatch.setattr(prefill, "free_memory", lambda: None)
    assert prefill.timed_or_out_of_memory(lambda: None) == (None, "out of GPU memory")
    row = {"step": "14", "lengths": "skewed", "G": 1, "D": 64, "key_ms": 1.0, "padded_sdpa_ms": None,
           "padded_sdpa_timing": "out of GPU memory", "varlen_attn_ms": 2.0}  # fmt: skip
    assert [f["baseline"] for f in prefill.figures([row])] == ["varlen_attn"]


def test_a_gpu_side_expectation_names_a_tampering_attack_and_another_rule():
    """bench tampering accepts a second rule on a GPU only for attacks it knows, and only one other than the CPU's."""
    from bench.tampering_on_gpu import ON_A_GPU_ALSO, expected

    table = expected()
    for name, (rule, words) in ON_A_GPU_ALSO.items():
        assert name in table and table[name][1] != rule and words
