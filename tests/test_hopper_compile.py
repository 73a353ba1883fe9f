"""The Hopper track's kernels compiled for sm_90a on this machine, not run: Triton's compiler (and the ptxas in its
wheel) needs no GPU. The answer keys and the variant compile at the lessons' shapes; of the known-wrong kernels, the
one with the wrong layout conversion does not compile, as its `expect:` says, and the one that reads the accumulator
before its last wait compiles with no wait for every product in flight before that read (`mma_waited` rejects it from
its text; what the compiler does below the PTX, a GPU shows). And the
replay's way: the key's plan recorded, its kernels built from the checked text, and the plan performed under the
replay process's seal (its audit hook), each launch compiled for sm_90a where a GPU would run it.

The compiler runs in a fresh Python without TRITON_INTERPRET (the tests' own process has imported Triton's language
for the interpreter). A GPU grades all of them (`make solutions`); this is the part a CPU can check, so it runs with
`make test-all`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checks.authoring.wrong import materialize
from checks.registry import ROOT, get_puzzle

pytestmark = pytest.mark.exhaustive

WAIT_ALL = "wgmma.wait_group.sync.aligned 0"

# Each file's function called once, every launch compiled for sm_90a instead of run, at a shape of its puzzle's GPU
# cases that is no multiple of a box; prints one JSON line: per file, what the compiler gave or the error it raised.
COMPILE = r"""
import json, sys, traceback
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.experimental.gluon._runtime import GluonASTSource
from triton.runtime.jit import JITFunction, create_function_from_signature
from checks.engine.submission import load_module

TARGET = GPUTarget("cuda", 90, 32)
seen = []


def compile_instead(self, *args, grid, warmup, **kwargs):
    backend = make_backend(TARGET)
    binder = create_function_from_signature(self.signature, self.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound, specialization, options)
    kernel = triton.compile(GluonASTSource(self, signature, constexprs, attrs), target=TARGET, options=options.__dict__)
    seen.append({"kernel": self.__name__, "ptx": kernel.asm["ptx"], "shared": kernel.metadata.shared})


JITFunction.run = compile_instead
torch.cuda.get_device_properties = lambda device: type("P", (), {"multi_processor_count": 132})()
results = []
for number, path in zip(sys.argv[1::2], sys.argv[2::2]):
    seen.clear()
    module = load_module(__import__("pathlib").Path(path), "compiled_" + str(len(results)))
    try:
        if number == "16a":
            module.tma_copy(torch.zeros(1000, 776, dtype=torch.float16))
        elif number == "16b":
            module.hopper_matmul(torch.zeros(33, 8000, dtype=torch.float16), torch.zeros(8000, 24, dtype=torch.float16))
        else:
            q = torch.zeros(1, 2, 777, 64, dtype=torch.float16)
            module.hopper_attention_fwd(q, q, q, True, 0.125)
        results.append({"compiled": list(seen)})
    except Exception as exc:
        results.append({"error": "".join(traceback.format_exception(exc))})
print(json.dumps(results))
"""


def compiled(files: list[tuple[str, Path]]) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    argv = [str(x) for number, path in files for x in (number, path)]
    done = subprocess.run(
        [sys.executable, "-c", COMPILE, *argv], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_keys_compile_for_sm_90a_and_a_known_wrong_kernel_does_what_it_says(tmp_path):
    keys = [("16a", "16a_tma_copy.py"), ("16b", "16b_hopper_matmul.py"), ("16", "16_hopper_attention_fwd.py"),
            ("16", "variants/16_software_pipelined.py")]  # fmt: skip
    wrong_layout = materialize(get_puzzle("16"), get_puzzle("16").wrong_dir / "rescale_in_the_wrong_slice.edit.yaml",
                               tmp_path)  # fmt: skip
    matmul = get_puzzle("16b")
    early_read = materialize(matmul, matmul.wrong_dir / "accumulator_read_before_wait.edit.yaml", tmp_path)
    files = [(n, ROOT / "solutions" / f) for n, f in keys] + [("16", wrong_layout), ("16b", early_read)]
    *key_results, layout, unwaited = compiled(files)
    for (number, file), result in zip(keys, key_results, strict=True):
        assert "error" not in result, (file, result.get("error", "")[-2000:])
        (kernel,) = result["compiled"]
        assert 0 < kernel["shared"] <= 228 * 1024, file  # an H100's shared memory per SM
        assert number == "16a" or WAIT_ALL in kernel["ptx"], file  # every product waited for before its use
    assert "expected expand_dims input layout to be sliced in axis 1 but got 0" in layout["error"]
    assert "error" not in unwaited, unwaited.get("error", "")[-2000:]
    (kernel,) = unwaited["compiled"]
    assert WAIT_ALL not in kernel["ptx"] and "wgmma.wait_group.sync.aligned 1" in kernel["ptx"]


# The replay process's path for one case, on a CPU: the key's plan recorded, the kernels built from the checked text,
# the seal of a replay process (harden with the kernel files), the plan performed with each launch compiled
REPLAY = r"""
import sys, tempfile
from pathlib import Path
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.experimental.gluon._runtime import GluonASTSource
from triton.runtime.jit import JITFunction, create_function_from_signature
import checks
from checks.engine.answer_key import key_plan_here
from checks.engine.contract.kernel_source import KernelSource
from checks.engine.processes.hardening import harden
from checks.engine.replay.kernels import build
from checks.engine.replay.perform import Performer
from checks.memory import Arena
from checks.puzzles import spec_module
from checks.registry import get_puzzle

TARGET = GPUTarget("cuda", 90, 32)


def compile_instead(self, *args, grid, warmup, **kwargs):
    backend = make_backend(TARGET)
    binder = create_function_from_signature(self.signature, self.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound, specialization, options)
    kernel = triton.compile(GluonASTSource(self, signature, constexprs, attrs), target=TARGET, options=options.__dict__)
    print("compiled", self.__name__, kernel.metadata.shared, flush=True)


torch.cuda.get_device_properties = lambda device: type("P", (), {"multi_processor_count": 132})()
puzzle = get_puzzle(sys.argv[1])
case = puzzle.cases.gpu[2]
kept = key_plan_here(puzzle, "cpu", case)
plan, source = kept["plan"], KernelSource.from_dict(kept["kernel_source"])
kernels, files = build(source, plan["globals"], Path(tempfile.mkdtemp()))
JITFunction.run = compile_instead
harden([], lambda reason: print("REFUSED", reason, flush=True), read_only=[Path(checks.__file__).parent],
       kernel_files=list(files))
arena = Arena("cpu", torch.Generator().manual_seed(1))
Performer(plan, kernels, spec_module(puzzle).make_inputs(case, arena), arena, "cpu", interpret=False).run()
print("performed", flush=True)
"""


def test_the_replay_builds_and_compiles_a_gluon_plan_under_its_seal(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=str(ROOT), TRITON_CACHE_DIR=str(tmp_path / "cache"))  # compiled afresh, under the seal
    done = subprocess.run(
        [sys.executable, "-c", REPLAY, "16a"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "REFUSED" not in done.stdout
    assert "compiled _tma_copy_kernel" in done.stdout and done.stdout.strip().endswith("performed")
