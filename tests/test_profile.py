"""`make profile` (`python -m bench profile`) without a GPU: it says what it needs; its table, its fall-back to
do_bench, and the warp timeline of the Hopper keys, each given canned Proton output written from Proton's formats:
a tree profile (hatchet's JSON: the root with a node per scope and per kernel, kernels carrying "time (ns)" and
"count") and an instrumentation trace (Chrome's trace format: "X" events whose pid is "<kernel> Core<SM> CTA<program>"
and tid "warp <w> (line <n>)", ts and dur the SM's cycles over args' "Frequency (MHz)"). tests/test_profile_gpu.py
runs it on a GPU; here, under `make test-all`, the instrumented Hopper keys are compiled for sm_90a with Proton's
passes, not run."""

from __future__ import annotations

import json
import re

import pytest

from bench import profile, warp_timeline
from checks.authoring.wrong import answer_key_body
from checks.engine.judging.timing import KNOWN_PEAKS
from checks.engine.timing import Peaks, roofline_share
from checks.registry import get_puzzle

# a profile of two contenders, as `proton.start(..., context="shadow")` with a `proton.scope` per contender writes it
TREE = [
    {"frame": {"name": "ROOT", "type": "function"}, "metrics": {}, "children": [
        {"frame": {"name": "yours", "type": "function"}, "metrics": {}, "children": [
            {"frame": {"name": "_matmul_kernel", "type": "function"},
             "metrics": {"count": 10, "time (ns)": 2_000_000, "device_id": "0", "device_type": "CUDA"},
             "children": []},
            {"frame": {"name": "elementwise_kernel", "type": "function"},
             "metrics": {"count": 20, "time (ns)": 500_000, "device_id": "0", "device_type": "CUDA"},
             "children": []},
        ]},
        {"frame": {"name": "torch.matmul", "type": "function"}, "metrics": {}, "children": [
            {"frame": {"name": "cutlass_gemm", "type": "function"}, "metrics": {}, "children": [
                {"frame": {"name": "sm90_xmma_gemm", "type": "function"},
                 "metrics": {"count": 10, "time (ns)": 1_500_000, "device_id": "0", "device_type": "CUDA"},
                 "children": []},
            ]},
        ]},
    ]},
    {"CUDA": {"0": {"arch": "90", "num_sms": 132, "clock_rate": 1980000, "memory_clock_rate": 2619000,
                    "bus_width": 5120}}},
]  # fmt: skip


def event(program: str, warp: int, line: int, name: str, ts: float, dur: float) -> dict:
    return {"cname": "good", "name": name, "cat": "_attn_fwd", "ph": "X", "pid": program,
            "tid": f"warp {warp} (line {line})", "ts": ts, "dur": dur,
            "args": {"Init Time (ns)": 0, "Frequency (MHz)": 1000.0}}  # fmt: skip


CTA0, CTA1 = "_attn_fwd Core4 CTA0", "_attn_fwd Core9 CTA1"
TRACE = {"displayTimeUnit": "ns", "traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "not a scope"}},
    event(CTA0, 8, 0, "wait for a free slot", 1000.0, 0.5),
    event(CTA0, 8, 0, "issue TMA loads of K, V", 1000.5, 0.25),
    event(CTA0, 0, 0, "wait for K", 1000.2, 1.0),
    event(CTA0, 0, 0, "softmax", 1001.2, 2.0),
    event(CTA0, 0, 1, "wait for V", 1001.6, 0.4),  # overlaps the softmax: a second line of warp 0
    event(CTA0, 4, 0, "softmax", 1001.0, 3.0),
    event(CTA1, 0, 0, "softmax", 5000.0, 2.0),
]}  # fmt: skip
ROLES = (warp_timeline.Role(0, 3, "consumer 0"), warp_timeline.Role(4, 7, "consumer 1"),
         warp_timeline.Role(8, 8, "producer"))  # fmt: skip


def test_without_a_gpu_it_says_what_it_needs_in_one_sentence_and_exits_2(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert profile.main(["16"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == profile.NO_GPU + "\n"
    assert "needs a CUDA GPU" in profile.NO_GPU and profile.NO_GPU.count(". ") == 0  # one sentence
    assert profile.main(["99"]) == 2 and "99" in capsys.readouterr().err  # an unknown puzzle: said before the GPU


def test_protons_tree_gives_each_scopes_kernels_per_call():
    found = profile.kernels_by_scope(TREE, calls=10)
    assert list(found) == ["yours", "torch.matmul"]
    assert [(k.name, k.calls, k.us) for k in found["yours"]] == [("_matmul_kernel", 1.0, 200.0),
                                                                 ("elementwise_kernel", 2.0, 50.0)]  # fmt: skip
    assert [(k.name, k.calls, k.us) for k in found["torch.matmul"]] == [("sm90_xmma_gemm", 1.0, 150.0)]


def test_the_table_gives_times_shares_rates_and_the_fraction_of_the_peak():
    found = profile.kernels_by_scope(TREE, calls=10)
    contenders = [profile.Contender("yours", found["yours"]), profile.Contender("torch.matmul", found["torch.matmul"]),
                  profile.Contender("answer key", problem="it raised RuntimeError: no")]  # fmt: skip
    side = 4096
    nbytes, flops = 3 * side * side * 2, 2 * side**3
    _, tflops_peak, gbps_peak = next(row for row in KNOWN_PEAKS if row[0] == ("H100",))
    roof = Peaks(gbps_peak, tflops_peak)
    lines = profile.table_lines(contenders, nbytes, flops, roof)
    yours = next(line for line in lines if line.startswith("yours"))
    assert "250.00" in yours and f"{flops / 250e-6 / 1e12:.3g} TFLOPS" in yours  # 200 + 50 us
    assert f"{100 * roofline_share(nbytes, flops, 0.25, roof):.1f}%" in yours
    kernel = next(line for line in lines if "_matmul_kernel" in line)
    assert re.search(r"\b1\s+200\.00\s+80\.0%", kernel)  # 1 launch a call, 200 us, 80% of yours
    assert re.search(r"elementwise_kernel\s+2\s+50\.00\s+20\.0%", "\n".join(lines))
    assert "answer key" in lines[-1] and "not timed: it raised RuntimeError" in lines[-1]
    memory = profile.table_lines(contenders[:1], nbytes, 0.0, roof)[1]  # no flops: memory-bound, in TB/s
    assert f"{nbytes / 250e-6 / 1e12:.3g} TB/s" in memory


def test_the_records_figures_are_each_contenders_time_beside_the_baseline_and_its_share_of_the_peak():
    found = profile.kernels_by_scope(TREE, calls=10)
    puzzle = get_puzzle("16b")
    contenders = [profile.Contender("yours", found["yours"]), profile.Contender(puzzle.baseline, found["torch.matmul"])]
    figures = profile.figures(contenders, puzzle, 1e6, 1e11, Peaks(3350.0, 989.0))
    time = next(f for f in figures if f["name"] == "profile 16b yours" and f["metric"] == "time")
    assert time["value"] == pytest.approx(0.25) and time["ratio"] == pytest.approx(0.15 / 0.25)
    assert time["baseline"] == puzzle.baseline
    shares = [f for f in figures if f["metric"] == "roofline share"]
    assert len(shares) == 2 and all(0 < f["value"] < 1 for f in shares)


def test_where_proton_fails_or_records_nothing_each_call_is_timed_whole_and_the_note_says_why(tmp_path):
    calls = {"yours": lambda: None, "torch copy": lambda: None}

    def failing(calls, out, repeat):
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    works = {"probe": lambda out: "", "clock": lambda fn: 0.5}
    found, source, notes = profile.kernel_times(calls, tmp_path, 5, profiler=failing, **works)
    assert source == profile.DO_BENCH and notes == ["Proton failed: RuntimeError: CUPTI_ERROR_NOT_INITIALIZED"]
    assert {name: [(k.name, k.calls, k.us) for k in ks] for name, ks in found.items()} == {
        name: [(profile.WHOLE, None, 500.0)] for name in calls}  # fmt: skip
    empty = lambda calls, out, repeat: {"yours": profile.kernels_by_scope(TREE, 10)["yours"]}
    found, source, notes = profile.kernel_times(calls, tmp_path, 5, profiler=empty, **works)
    assert source == profile.DO_BENCH and notes == ["Proton recorded no kernel for torch copy"]
    both = lambda calls, out, repeat: {name: [profile.Kernel("k", 1.0, 3.0)] for name in calls}
    found, source, notes = profile.kernel_times(calls, tmp_path, 5, profiler=both, **works)
    assert source == profile.PROTON and notes == [] and found["yours"][0].us == 3.0
    found, source, notes = profile.kernel_times(calls, tmp_path, 5, use_proton=False, profiler=both, **works)
    assert source == profile.DO_BENCH and found["yours"][0].name == profile.WHOLE
    trial = {"probe": lambda out: "its trial ended with exit status -6", "clock": lambda fn: 0.5}
    found, source, notes = profile.kernel_times(calls, tmp_path, 5, profiler=both, **trial)  # never reached
    assert source == profile.DO_BENCH and notes == ["Proton failed: its trial ended with exit status -6"]


def test_protons_trial_in_a_process_of_its_own_says_why_it_failed(tmp_path):
    import subprocess
    from types import SimpleNamespace

    def aborted(argv, **kw):
        return SimpleNamespace(returncode=-6, stderr="terminate called after throwing\nCUPTI_ERROR_NOT_INITIALIZED\n")

    def hung(argv, **kw):
        raise subprocess.TimeoutExpired(argv, kw["timeout"])

    def silent(argv, **kw):
        (tmp_path / "proton_probe.hatchet").write_text(json.dumps([{"children": []}, {}]), encoding="utf-8")
        return SimpleNamespace(returncode=0, stderr="")

    def works(argv, **kw):
        assert argv[-1] == str(tmp_path / "proton_probe")  # the name Proton adds .hatchet to
        kernel = TREE[0]["children"][0]["children"][0]
        tree = [{"frame": {"name": "ROOT"}, "children": [{"frame": {"name": "probe"}, "children": [kernel]}]}, {}]
        (tmp_path / "proton_probe.hatchet").write_text(json.dumps(tree), encoding="utf-8")
        return SimpleNamespace(returncode=0, stderr="")

    assert profile.proton_probe(tmp_path, run=aborted) == (
        "its trial ended with exit status -6 (CUPTI_ERROR_NOT_INITIALIZED)")  # fmt: skip
    assert profile.proton_probe(tmp_path, timeout=7, run=hung) == "its trial did not finish in 7 s"
    assert profile.proton_probe(tmp_path, run=silent) == "its trial recorded no kernel"
    assert profile.proton_probe(tmp_path, run=lambda argv, **kw: SimpleNamespace(returncode=0, stderr="")).startswith(
        "its trial wrote no profile that reads (FileNotFoundError")  # fmt: skip
    assert profile.proton_probe(tmp_path, run=works) == ""
    assert not (tmp_path / "proton_probe.hatchet").exists()  # the trial's profile is not left among the outputs


def test_the_trace_gives_each_programs_scopes_from_its_first():
    found = warp_timeline.spans(TRACE)
    assert len(found) == 7  # the metadata event is not a scope
    assert warp_timeline.fullest_program(found) == CTA0
    first = [s for s in found if s.program == CTA0 and s.warp == 8]
    assert [(s.scope, s.start, s.end) for s in first] == [("wait for a free slot", 0.0, 500.0),
                                                           ("issue TMA loads of K, V", 500.0, 750.0)]  # fmt: skip
    assert next(s for s in found if s.program == CTA1).start == 0.0
    older = event(CTA1 + " [measure in clock cycle (assume 1GHz)]", 0, 0, "softmax", 2.0, 1.5)  # pid with a suffix
    assert warp_timeline.spans({"traceEvents": [{**older, "args": {}}]})[0].end == 1500.0  # no frequency: 1000 MHz
    lanes = warp_timeline.lanes(found, CTA0)
    assert [len(rows) for _, rows in sorted(lanes.items())] == [2, 1, 1]  # warp 0's overlapping scope: a second row
    touching = [event(CTA1, 0, 0, "a", 0.1, 0.2), event(CTA1, 0, 0, "b", 0.3, 0.1)]  # 0.1 + 0.2 > 0.3 in floats
    assert [
        len(rows) for rows in warp_timeline.lanes(warp_timeline.spans({"traceEvents": touching}), CTA1).values()
    ] == [1]
    with pytest.raises(ValueError, match="no scope"):
        warp_timeline.fullest_program([])


def test_the_phase_table_averages_each_parts_warps_and_shares_the_programs_time():
    rows = warp_timeline.phase_table(warp_timeline.spans(TRACE), CTA0, ROLES)
    by = {(r["part"], r["scope"]): r for r in rows}
    assert by[("consumer 0", "softmax")]["cycles"] == pytest.approx(2000.0)
    assert by[("consumer 1", "softmax")]["share"] == pytest.approx(3.0 / 4.0)  # the program runs 4000 cycles
    assert by[("producer", "wait for a free slot")]["cycles"] == pytest.approx(500.0)
    text = "\n".join(warp_timeline.phase_lines(rows))
    assert "producer" in text and "75.0%" in text


def test_the_warp_timeline_without_a_hopper_gpu_says_what_it_needs(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert warp_timeline.main(["16"]) == 2 and capsys.readouterr().out == warp_timeline.NEEDS_HOPPER + "\n"


def test_the_warp_timeline_takes_other_sizes_as_a_yaml_mapping(capsys):
    assert warp_timeline.case_mapping("{D: 64, N: 4096}") == {"D": 64, "N": 4096}
    with pytest.raises(SystemExit):
        warp_timeline.main(["16", "--case", "64"])
    assert "is not a mapping of sizes" in capsys.readouterr().err


# the same answer through make profile's own process for the timeline (python -m bench warp-timeline): seconds
@pytest.mark.exhaustive
def test_make_profile_quotes_why_the_timeline_was_not_drawn(tmp_path):
    import torch

    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9:
        pytest.skip("a Hopper GPU draws the timeline: tests/test_profile_gpu.py")
    notes: list[str] = []
    assert profile.timeline(get_puzzle("16"), tmp_path, notes) == ["", warp_timeline.NEEDS_HOPPER]
    assert notes == [f"timeline not drawn: {warp_timeline.NEEDS_HOPPER}"]
    assert profile.timeline(get_puzzle("4"), tmp_path, notes) == []  # no timeline for a puzzle before the Hopper track


def test_the_timeline_picture_is_drawn(tmp_path):
    found = warp_timeline.spans(TRACE)
    path = warp_timeline.draw(found, CTA0, ROLES, "a test", tmp_path / "timeline.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


@pytest.mark.parametrize("step", warp_timeline.STEPS)
def test_an_instrumented_copy_is_its_key_with_scopes_only(step):
    """Take the scopes out and the key comes back, line for line: the copy measures the key, not another kernel."""
    copy = warp_timeline.instrumented(step)
    compile(copy.source, f"instrumented {step}", "exec")
    lines = copy.source.splitlines()
    scopes = [line.strip() for line in lines if "pl.enter_scope(" in line or "pl.exit_scope(" in line]
    entered = [s.split('"')[1] for s in scopes if s.startswith("pl.enter_scope(")]
    assert entered and sorted(entered) == sorted(s.split('"')[1] for s in scopes if s.startswith("pl.exit_scope("))
    body = copy.source.split("import triton.profiler.language as pl\n", 1)[1]
    without = "\n".join(line for line in body.splitlines() if line.strip() not in scopes)
    assert without == answer_key_body(get_puzzle(step)).rstrip("\n")
    assert copy.roles and copy.case
    json.dumps(copy.case)  # plain data, as case_from reads it


# the no-GPU answer of the first test again, through make (which asks Python whether torch is there, then starts one
# that imports torch: seconds): `make test-all` runs it
@pytest.mark.exhaustive
def test_make_profile_without_a_gpu_says_what_it_needs():
    import os
    import subprocess

    import torch

    from checks.registry import ROOT

    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}  # not under make test
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: tests/test_profile_gpu.py runs make profile's work here")
    run = subprocess.run(["make", "profile", "PUZZLE=16"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert run.returncode == 2 and profile.NO_GPU in run.stderr


def test_a_profile_under_the_results_is_recorded_in_its_run_folder(tmp_path):
    results = tmp_path / "results"
    assert (
        profile.run_folder(results / "2026-12-06-h100-profile" / "16", results) == results / "2026-12-06-h100-profile"
    )
    assert profile.run_folder(results / "2026-12-06-h100-profile", results) == results / "2026-12-06-h100-profile"
    assert profile.run_folder(tmp_path / "profile" / "16_hopper_attention_fwd", results) is None
    assert profile.run_folder(results, results) is None


def test_the_makefiles_profile_target_is_listed_by_make_help_and_passes_file_and_args():
    """`make help` lists the targets whose line has a `## ` description; the recipe hands PUZZLE, FILE and ARGS on."""
    from checks.registry import ROOT

    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if line.startswith("profile:"))
    assert "## GPU: " in line and "make profile PUZZLE=N [FILE=path]" in line
    recipe = text.split("\nprofile:", 1)[1].split("\n\n", 1)[0]
    assert '-m bench profile $(PUZZLE) $(if $(FILE),--file "$(FILE)") $(ARGS)' in recipe
    assert "profile" in text.split(".PHONY:", 1)[1].split("\n", 1)[0].split()


# The instrumented copies compiled for sm_90a with Proton's instrumentation passes, as `make profile` compiles them on
# a Hopper GPU, but not run: Triton's compiler and the ptxas in its wheel need no GPU, and Proton's hook needs of the
# driver only the device's shared memory (a stand-in driver gives an H100's). A fresh Python without TRITON_INTERPRET.
COMPILE_INSTRUMENTED = r"""
import json, sys
from pathlib import Path
from types import SimpleNamespace
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.experimental.gluon._runtime import GluonASTSource
from triton.profiler.hooks.instrumentation import InstrumentationHook
from triton.runtime.jit import JITFunction, create_function_from_signature
from bench import warp_timeline
from checks.engine.submission import load_module

TARGET = GPUTarget("cuda", 90, 32)


class Driver:
    utils = SimpleNamespace(get_device_properties=lambda device: {"max_shared_mem": 232448})

    def get_current_device(self):
        return 0

    def get_current_target(self):
        return TARGET


def compile_instead(self, *args, grid, warmup, **kwargs):
    backend = make_backend(TARGET)
    binder = create_function_from_signature(self.signature, self.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound, specialization, options)
    kernel = triton.compile(GluonASTSource(self, signature, constexprs, attrs), target=TARGET, options=options.__dict__)
    seen.append({"ptx": kernel.asm["ptx"], "scratch": kernel.metadata.profile_scratch_size})


triton.runtime.driver.set_active(Driver())
InstrumentationHook(warp_timeline.instrumentation_mode()).activate()
JITFunction.run = compile_instead
torch.cuda.get_device_properties = lambda device: SimpleNamespace(multi_processor_count=132)
step, folder = sys.argv[1], Path(sys.argv[2])
seen = []
path = folder / f"instrumented_{step}.py"
path.write_text(warp_timeline.instrumented(step).source, encoding="utf-8")
module = load_module(path, "instrumented")
if step == "16a":
    module.tma_copy(torch.zeros(1000, 776, dtype=torch.float16))
elif step == "16b":
    module.hopper_matmul(torch.zeros(33, 8000, dtype=torch.float16), torch.zeros(8000, 24, dtype=torch.float16))
else:
    q = torch.zeros(1, 2, 777, 128, dtype=torch.float16)
    module.hopper_attention_fwd(q, q, q, True, 0.125)
print(json.dumps(seen))
"""


@pytest.mark.exhaustive
@pytest.mark.parametrize("step", warp_timeline.STEPS)
def test_an_instrumented_copy_compiles_for_hopper_with_protons_passes(step, tmp_path):
    import os
    import subprocess
    import sys

    from checks.registry import ROOT

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", COMPILE_INSTRUMENTED, step, str(tmp_path)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (kernel,) = json.loads(done.stdout.splitlines()[-1])
    records = sum(line.count("pl.enter_scope(") + line.count("pl.exit_scope(") for line in
                  warp_timeline.instrumented(step).source.splitlines())  # fmt: skip
    assert kernel["ptx"].count("%clock") >= 2 * records  # each record reads the SM's 64-bit clock (two halves)
    assert kernel["scratch"] > 0  # the records' buffer in global memory
    if step == "16":
        assert "setmaxnreg" in kernel["ptx"]  # still warp-specialised, the registers traded between the partitions
