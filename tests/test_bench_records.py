"""bench/records.py: the record of a run (record.json) read back with its types checked, listed, shown and compared;
its figures read from the tools' result files (bench/figures.py); every folder of bench/results/ has one."""

from __future__ import annotations

import copy
import json
import platform
from dataclasses import replace
from pathlib import Path

import pytest

from bench import figures, gpu_run, records
from bench.records import Figure, Machine, Record, RecordError, compare, parse_record, read_record, write_record
from checks.bench_results import gpu_slug
from checks.registry import ROOT

RESULTS = ROOT / "bench" / "results"
H200 = Machine(gpu="NVIDIA H200", gpus=1, driver="580.159.04", runtime="firecracker", kernel="6.18.44-fc-v1272",
               python="3.12.3", torch="2.11.0+cu130", triton="3.6.0")  # fmt: skip
A_FIGURES = [Figure("make solutions/1 vector_add", "time", "ms", 0.74, "torch.add", 0.74, 1.0),
             Figure("wall-times/1/warm, second", "report", "s", 8.0),
             Figure("wall-times/9/warm, second", "report", "s", 10.5),
             Figure("only in A", "report", "s", 1.0)]  # fmt: skip
B_FIGURES = [Figure("wall-times/9/warm, second", "report", "s", 7.0),
             Figure("make solutions/1 vector_add", "time", "ms", 0.70, "torch.add", 0.72, 1.03),
             Figure("wall-times/1/warm, second", "verdict", "s", 2.2),  # the same name, another metric
             Figure("only in B", "report", "s", 2.0)]  # fmt: skip


def valid() -> dict:
    return json.loads(Record(["python -m bench gpu-run --latency 1"], "abc1234", "2026-11-29T05:48:25Z", H200,
                             A_FIGURES[:2], ["a note"]).to_json())  # fmt: skip


def fixture(folder: Path, found: list[Figure], date: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(Record(["cmd"], "abc1234", date, H200, found).to_json(), encoding="utf-8")
    return folder


def test_a_valid_record_reads_back_as_it_was_written():
    record = parse_record(valid())
    assert record.machine == H200 and record.figures == A_FIGURES[:2] and record.commit == "abc1234"
    assert parse_record(json.loads(record.to_json())) == record


def _set(path: str, value):
    def change(data: dict) -> None:
        *parents, last = path.split(".")
        for key in parents:
            data = data[int(key)] if isinstance(data, list) else data[key]
        at = int(last) if isinstance(data, list) else last
        if value is KeyError:
            del data[at]
        else:
            data[at] = value

    return change


MALFORMED = {  # what is wrong -> (the change, what the message must name)
    "a field missing": (_set("commit", KeyError), "lacks the field(s) ['commit']"),
    "an unknown field": (_set("machine.cuda", "13.0"), "machine has fields the format does not know: ['cuda']"),
    "a value as text": (_set("figures.0.value", "0.74"), "figures[0].value is '0.74': it must be a finite number"),
    "a count as a number": (_set("machine.gpus", 1.5), "machine.gpus is 1.5: it must be a whole number"),
    "a value missing": (_set("figures.1.value", KeyError), "figures[1] lacks the field(s) ['value']"),
    "a boolean value": (_set("figures.0.value", True), "figures[0].value is True"),
    "a command not text": (_set("commands", "python x"), "commands is 'python x': it must be a list of strings"),
    "a runtime guessed": (_set("machine.runtime", "vm"), "runtime is 'vm': it must be one of"),
    "a date not ISO": (_set("date", "29 Nov 2026"), "date is '29 Nov 2026': it must be an ISO date"),
    "another schema": (_set("schema", 2), "this reader reads schema 1"),
    "a figure twice": (_set("figures.1", valid()["figures"][0]), "is there twice"),
    "figures not a list": (_set("figures", {"a": 1}), "figures is {'a': 1}: it must be a list of figures"),
}


@pytest.mark.parametrize("wrong", list(MALFORMED))
def test_the_reader_rejects_a_malformed_record_and_says_where(wrong):
    change, message = MALFORMED[wrong]
    data = copy.deepcopy(valid())
    change(data)
    with pytest.raises(RecordError) as error:
        parse_record(data, "bench/results/x/record.json")
    assert message in str(error.value) and str(error.value).startswith("bench/results/x/record.json")


def test_a_file_that_is_not_a_record_is_refused(tmp_path):
    with pytest.raises(RecordError, match="does not exist: `python -m bench records backfill"):
        read_record(tmp_path)
    (tmp_path / "record.json").write_text("{not json")
    with pytest.raises(RecordError, match="is not JSON"):
        read_record(tmp_path)
    (tmp_path / "record.json").write_text("[1, 2]")
    with pytest.raises(RecordError, match="must be an object with the fields"):
        read_record(tmp_path / "record.json")


def test_compare_matches_figures_by_name_and_metric(tmp_path, capsys):
    a = fixture(tmp_path / "2026-11-28-h200", A_FIGURES, "2026-11-28")
    b = fixture(tmp_path / "2026-11-29-h200", B_FIGURES, "2026-11-29T05:48:25Z")
    both = {(f.name, f.metric) for f in A_FIGURES} & {(f.name, f.metric) for f in B_FIGURES}
    rows = compare(read_record(a), read_record(b))
    assert [(r.name, r.metric) for r in rows] == [(f.name, f.metric) for f in A_FIGURES if (f.name, f.metric) in both]
    of_b = {(f.name, f.metric): f.value for f in B_FIGURES}
    for row, f in zip(rows, [f for f in A_FIGURES if (f.name, f.metric) in both], strict=True):
        assert (row.a, row.b, row.ratio) == (f.value, of_b[f.name, f.metric], of_b[f.name, f.metric] / f.value)
    assert records.main(["compare", str(a), str(b / "record.json")]) == 0
    printed = capsys.readouterr().out.splitlines()
    table = [line.split("\t") for line in printed[printed.index("name\tmetric\tunit\tA\tB\tB/A") + 1 :]]
    assert [(t[0], t[1], t[5]) for t in table] == [(r.name, r.metric, f"{r.ratio:.4g}") for r in rows]
    assert f"{len(rows)} figures in both (A has {len(A_FIGURES)}, B {len(B_FIGURES)})" in printed


def test_compare_says_so_when_nothing_matches(tmp_path, capsys):
    a = fixture(tmp_path / "a", A_FIGURES[3:], "2026-11-28")
    b = fixture(tmp_path / "b", B_FIGURES[3:], "2026-11-29")
    assert records.main(["compare", str(a), str(b)]) == 1
    assert "No figure of" in capsys.readouterr().out
    assert records.main(["compare", str(a), str(tmp_path / "nowhere")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_list_and_show_give_a_line_per_record_and_every_figure(tmp_path, capsys):
    a = fixture(tmp_path / "2026-11-28-h200", A_FIGURES, "2026-11-28")
    b = fixture(tmp_path / "2026-11-29-h200", B_FIGURES[:2], "2026-11-29")
    assert records.main(["list", str(a), str(b)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == [a.name, b.name]
    for line, (folder, found) in zip(lines, [(a, A_FIGURES), (b, B_FIGURES[:2])], strict=True):
        assert line.split("\t")[1:5] == [read_record(folder).date, H200.gpu, f"driver {H200.driver}", H200.runtime]
        assert line.endswith(f"\t{len(found)} figures") and f"torch {H200.torch}" in line
    assert records.main(["show", str(a)]) == 0
    shown = capsys.readouterr().out
    assert all(f"{f.name}\t{f.metric}\t{f.unit}\t{f.value:.4g}" in shown for f in A_FIGURES)
    assert "runtime: firecracker (kernel 6.18.44-fc-v1272)" in shown and "commit: abc1234" in shown


@pytest.mark.parametrize(("release", "runtime"), [("6.18.44-fc-v1272", "firecracker"), ("6.1.102-fc", "firecracker"),
                                                  ("4.4.0", "gvisor"), ("6.8.0-45-generic", "unknown"),
                                                  ("6.5.6-300.fc39.x86_64", "unknown"), ("", "unknown")])  # fmt: skip
def test_the_runtime_is_read_from_the_kernel_release(release, runtime):
    assert records.runtime_of(release) == runtime


def test_this_cpu_machine_is_described_without_a_gpu():
    machine = records.machine_facts()
    assert machine.gpu == "cpu" and machine.gpus == 0 and machine.driver is None
    assert machine.runtime == records.runtime_of(platform.release()) and machine.kernel == platform.release()
    assert machine.python == platform.python_version() and machine.torch and machine.triton


def test_write_record_writes_then_adds_and_refuses_another_tree(tmp_path):
    folder = tmp_path / "run"
    file = write_record(folder, "python -m bench kept-plans", [A_FIGURES[0]], commit="abc1234", machine=H200)
    assert file == folder / "record.json" and read_record(folder).figures == [A_FIGURES[0]]
    newer = {"name": A_FIGURES[0].name, "metric": "time", "unit": "ms", "value": 0.8}
    write_record(folder, "python -m bench wall-times . 1", [newer, A_FIGURES[1]], commit="abc1234", machine=H200)
    record = read_record(folder)
    assert record.commands == ["python -m bench kept-plans", "python -m bench wall-times . 1"]
    assert record.figures == [Figure(**newer), A_FIGURES[1]]
    with pytest.raises(RecordError, match="is of commit abc1234, this run of def5678"):
        write_record(folder, "x", [], commit="def5678", machine=H200)
    with pytest.raises(RecordError, match="give it its own folder"):
        write_record(folder, "x", [], commit="abc1234", machine=Machine(gpu="NVIDIA H100 80GB HBM3"))
    with pytest.raises(RecordError, match="must be a finite number"):
        write_record(tmp_path / "other", "x", [{**newer, "value": float("nan")}], commit="c", machine=H200)
    assert not (tmp_path / "other").exists()


WALL_OLD = "main\t1\twarm, first\t10.8\tPASSED: all 5 cases\nmain\t1\twarm, second\t8.0\tPASSED: all 5 cases\n"
WALL_NEW = "checkout\tpuzzle\trun\treport s\tverdict s\tverdict\nmain\t1\twarm, second\t3.9\t2.2\tPASSED\n"
SOLUTIONS = """`make solutions` on NVIDIA H200, torch 2.11.0+cu130, triton 3.6.0, 2026-11-29:

| # | puzzle | answer key | cases | key ms | baseline | baseline ms | speed vs baseline | wrong kernels rejected |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| 4 | matmul_fast | pass | 8 | 0.2068 | torch.matmul | 0.1992 | 0.96x | 11/13 |
| 9 | flash_attention_v2_fwd | FAIL | 9 | - | scaled_dot_product_attention | - | - | 8/8 |
"""


def test_figures_are_read_from_the_tools_files(tmp_path):
    first, second = "wall-times/1/warm, first", "wall-times/1/warm, second"
    assert figures.wall_times_of(WALL_OLD) == [Figure(first, "report", "s", 10.8), Figure(second, "report", "s", 8.0)]
    two_trees = WALL_OLD.replace("main", ".before", 1)  # the checkout goes into the name where a file has several
    assert [f.name for f in figures.wall_times_of(two_trees)] == ["wall-times/.before/1/warm, first",
                                                                  "wall-times/main/1/warm, second"]  # fmt: skip
    assert figures.wall_times_of(WALL_NEW) == [Figure(second, "report", "s", 3.9), Figure(second, "verdict", "s", 2.2)]
    (tmp_path / "solutions-0.md").write_text(SOLUTIONS)
    timed = Figure("make solutions/4 matmul_fast", "time", "ms", 0.2068, "torch.matmul", 0.1992, 0.96)
    assert figures.make_solutions(tmp_path / "solutions-0.md") == [timed]  # the failed key's row has no time
    kept = "puzzle\ttiming case\tkept\tsame plan on two draws\tfirst s\tsecond s\tplan bytes\n"
    kept += "1\t{}\tTrue\tTrue\t0.7\t0.01\t2126\n"
    expected = [("kept-plans/1", "first", 0.7), ("kept-plans/1", "second", 0.01), ("kept-plans/1", "plan", 2126.0)]
    assert [(f.name, f.metric, f.value) for f in figures.kept_plans_of(kept)] == expected


def test_each_figure_keeps_its_file_and_compare_asks_which_one(tmp_path, capsys):
    """Two files with the same names (before a change, after it): each figure says its file; a comparison of the two
    that does not say which file of the folder it means is refused, one that does matches them."""
    (tmp_path / "wall-before.tsv").write_text(WALL_OLD)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "wall-after.tsv").write_text(WALL_NEW)
    (tmp_path / "solutions-0.md").write_text(SOLUTIONS + "\n" + SOLUTIONS)  # the same table twice
    found = figures.figures_in(tmp_path)
    assert [(f.file, f.name, f.metric) for f in found] == [
        ("a/wall-after.tsv", "wall-times/1/warm, second", "report"),
        ("a/wall-after.tsv", "wall-times/1/warm, second", "verdict"),
        ("solutions-0.md", "make solutions/4 matmul_fast", "time"),
        ("solutions-0.md", "make solutions/4 matmul_fast (2)", "time"),
        ("wall-before.tsv", "wall-times/1/warm, first", "report"),
        ("wall-before.tsv", "wall-times/1/warm, second", "report"),
    ]  # fmt: skip
    write_record(tmp_path, "python -m bench wall-times", None, commit="c", machine=H200)
    assert read_record(tmp_path).figures == found
    assert records.main(["compare", str(tmp_path), str(tmp_path)]) == 1
    refused = "'wall-times/1/warm, second' 'report' in 2 files (a/wall-after.tsv, wall-before.tsv): say which with"
    assert refused + " --a-file FILE" in capsys.readouterr().err
    assert records.main(["compare", str(tmp_path), str(tmp_path), "--a-file", "wall-before", "--b-file",
                         "a/wall-after.tsv"]) == 0  # fmt: skip
    table = capsys.readouterr().out.splitlines()[-1].split("\t")
    assert table == ["wall-times/1/warm, second", "report", "s", "8", "3.9", f"{3.9 / 8.0:.4g}"]
    assert records.main(["compare", str(tmp_path), str(tmp_path), "--a-file", "wall.tsv"]) == 1
    assert "A has no figure read from 'wall.tsv': its files are ['a/wall-after.tsv'" in capsys.readouterr().err


def test_a_gpu_run_writes_its_record_from_its_files(tmp_path, monkeypatch, capsys):
    """gpu-run's main with its steps replaced by one that writes a wall-time file: record.json holds its figures."""
    out = tmp_path / "run"
    monkeypatch.setattr(gpu_run, "describe_machine", lambda: (["NVIDIA H200, 580.159.04"], {"python": "3"}))
    monkeypatch.setattr(gpu_run, "execute", lambda plan, folder: (folder / "wall.tsv").write_text(WALL_NEW) and 0)
    monkeypatch.setattr(records, "machine_facts", lambda: H200)
    assert gpu_run.main(["--latency", "1", "--out", str(out)]) == 0
    record = read_record(out)
    assert record.commands == [f"python -m bench gpu-run --latency 1 --out {out}"] and record.machine == H200
    assert record.figures == [replace(f, file="wall.tsv") for f in figures.wall_times_of(WALL_NEW)]
    assert "The run's record:" in capsys.readouterr().out


def test_a_tools_table_is_written_to_its_file_and_recorded(tmp_path, monkeypatch):
    """wall-times and kept-plans --record FILE: the table goes to FILE and its figures into the folder's record; a
    file name no reader reads is refused before anything runs."""
    monkeypatch.setattr(records, "machine_facts", lambda: H200)
    monkeypatch.setattr(records, "current_commit", lambda: "abc1234")
    file = records.record_table(tmp_path / "run" / "wall-after.tsv", WALL_NEW, "python -m bench wall-times . 1")
    assert (tmp_path / "run" / "wall-after.tsv").read_text() == WALL_NEW and file == tmp_path / "run" / "record.json"
    record = read_record(tmp_path / "run")
    assert record.figures == [replace(f, file="wall-after.tsv") for f in figures.wall_times_of(WALL_NEW)]
    assert record.commands == ["python -m bench wall-times . 1"] and record.commit == "abc1234"
    assert records.main(["write", str(tmp_path / "run"), "python -m bench kept-plans", "--commit", "abc1234"]) == 0
    assert read_record(tmp_path / "run").commands[-1] == "python -m bench kept-plans"
    assert records.main(["write", str(tmp_path / "run"), "x", "--commit", "def5678"]) == 1  # another tree
    with pytest.raises(RecordError, match="reads no file of this name"):
        records.record_table(tmp_path / "run" / "latency.txt", WALL_NEW, "x")
    from bench import check_wall_times, kept_plans

    for tool, argv in ((check_wall_times, [".", "1"]), (kept_plans, ["1"])):
        with pytest.raises(SystemExit) as exit_:
            tool.main([*argv, "--record", str(tmp_path / "times.txt")])
        assert exit_.value.code == 2


FOLDERS = sorted(p for p in RESULTS.iterdir() if p.is_dir())


def test_the_results_have_run_folders():
    assert len(FOLDERS) >= 20


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_every_run_folder_has_a_valid_record(folder):
    """A new folder needs its record: gpu-run writes one; else `python -m bench records backfill FOLDER`."""
    record = read_record(folder)
    assert record.date[:10] >= folder.name[:10], "the record is older than its folder's name says"
    gpu = record.machine.gpu
    assert gpu == "cpu" if "-cpu-" in folder.name else gpu is None or gpu_slug(gpu) in folder.name, gpu


def test_a_record_reads_its_figures_again_after_a_merge(tmp_path):
    """merge-run rewrites a folder's results: refresh_figures reads them again and adds the command."""
    write_record(tmp_path, "python -m bench wall-times . 1", figures.wall_times_of(WALL_OLD), commit="c", machine=H200)
    (tmp_path / "wall.tsv").write_text(WALL_NEW)
    records.refresh_figures(tmp_path, "python -m bench merge-run RUN")
    record = read_record(tmp_path)
    assert record.figures == [replace(f, file="wall.tsv") for f in figures.wall_times_of(WALL_NEW)]
    assert record.commands[-1] == "python -m bench merge-run RUN"
    assert records.refresh_figures(tmp_path / "none", "x") == tmp_path / "none" / "record.json"
    assert not (tmp_path / "none").exists()


def test_a_backfilled_record_holds_what_the_files_state_and_nothing_else(tmp_path, capsys):
    stated = tmp_path / "2026-11-30-h200"
    stated.mkdir()
    readme = "# 2026-11-30: NVIDIA H200\n\n- command: `python -m bench gpu-run --latency 1`\n"
    (stated / "README.md").write_text(readme + "- commit: 1d52b95 (and uncommitted changes)\n\nThe tree was fb73977.\n")
    (stated / "gpu.txt").write_text("NVIDIA H200, 580.159.04\nNVIDIA H200, 580.159.04\n"
                                    "python 3.12.3 torch 2.11.0+cu130 triton 3.6.0 numpy 2.5.2\n")  # fmt: skip
    (stated / "wall.tsv").write_text(WALL_OLD)
    (stated / "uname.txt").write_text("Linux 6.18.44-fc-v1272 #1 SMP x86_64\n")
    assert records.main(["backfill", str(stated)]) == 0
    record = read_record(stated)
    assert (record.commands, record.commit, record.date) == (["python -m bench gpu-run --latency 1"], "fb73977",
                                                             "2026-11-30")  # fmt: skip
    assert record.machine == Machine(gpu="NVIDIA H200", gpus=2, driver="580.159.04", runtime="firecracker",
                                     kernel="6.18.44-fc-v1272", python="3.12.3", torch="2.11.0+cu130",
                                     triton="3.6.0")  # fmt: skip
    assert record.figures == figures.figures_in(stated)
    assert records.main(["backfill", str(stated)]) == 1 and "--force replaces it" in capsys.readouterr().err
    silent = tmp_path / "2026-11-30-h100"
    silent.mkdir()
    (silent / "README.md").write_text("# Notes\n\nSome timings, commit added in abc1234.\n")
    assert records.main(["backfill", str(silent)]) == 0
    record = read_record(silent)
    assert (record.commands, record.commit, record.figures) == ([], None, [])
    assert record.machine == Machine()  # every fact null, the runtime unknown
