"""What the grading machine can do, and the known ways it can be broken: `detect` finds the `Machine` (the one record
of it, `checks.engine.contract.protocol.Machine`)."""

from __future__ import annotations

import os
import re
import warnings

from checks.engine.compiler_arguments import compiler_arguments
from checks.engine.contract.protocol import Machine
from checks.engine.lean_interpreter import lean_interpreter

NUMPY_PITFALL_TEXT = "only 0-dimensional arrays can be converted to Python scalars"
# What numpy 2.x (before 2.4) says each time Triton's interpreter turns a one-element block into an int
# (a loop bound, an index): once per loop step, so thousands in a test run, and never the learner's doing.
# The same text is a filter in pyproject.toml's pytest settings.
INTERPRETER_DEPRECATION = "Conversion of an array with ndim > 0 to a scalar is deprecated"
INTERPRETER_MODULE = r"triton\.runtime\.interpreter"


def quiet_interpreter() -> None:
    """Ignore numpy's deprecation note about int(array) where Triton's interpreter makes it, and only there."""
    warnings.filterwarnings(
        "ignore", message=INTERPRETER_DEPRECATION, category=DeprecationWarning, module=INTERPRETER_MODULE
    )


def _version(text: str) -> tuple[int, int]:
    nums = [int(x) for x in re.findall(r"\d+", text)[:2]]
    return (nums + [0, 0])[0], (nums + [0, 0])[1]


def numpy_pitfall(triton_version: str, numpy_version: str) -> str | None:
    """Triton's interpreter before 3.9 breaks on numpy 2.4 and newer; say how to fix it.

    The grader and the notebooks work around it with `numpy_shim`; a learner's own scripts do not.
    """
    if _version(triton_version) < (3, 9) and _version(numpy_version) >= (2, 4):
        return (
            f"Triton {triton_version}'s CPU interpreter does not work with numpy {numpy_version} "
            "(it fails with 'only 0-dimensional arrays can be converted to Python scalars'). "
            "Install an older numpy with `pip install 'numpy<2.4'` (or run `make check`, which uses the "
            "course's own .venv with matching versions), then check again."
        )
    return None


def detect(force_interpreter: bool = False) -> Machine:
    """Decide GPU or interpreter. Must run before anything imports triton."""
    import numpy
    import torch

    interpret = force_interpreter or os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available()
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton
    except ImportError as exc:
        return Machine(
            "interpreter",
            "cpu",
            "CPU",
            torch.__version__,
            "missing",
            numpy.__version__,
            f"Triton is not installed ({exc}); run `make check`, which sets up a .venv with it.",
        )
    if interpret:
        quiet_interpreter()
        lean_interpreter()
        compiler_arguments()  # a kernel's scalars typed as a GPU's compiler types them: one kernel text, one method
        machine = Machine(
            "interpreter", "cpu", "CPU (Triton interpreter)", torch.__version__, triton.__version__, numpy.__version__
        )
        if numpy_pitfall(triton.__version__, numpy.__version__) and not numpy_shim():
            machine.problem = numpy_pitfall(triton.__version__, numpy.__version__)
        return machine
    return Machine(
        "gpu", "cuda", torch.cuda.get_device_name(), torch.__version__, triton.__version__, numpy.__version__
    )


def warm_up_gpu() -> None:
    """Make this process's CUDA context and load Triton's launch helpers (about a second on a GPU machine) while
    it waits for its job, so that no check waits for them."""
    from checks.engine.timing import quiet_gpu

    with quiet_gpu(timing=False):  # not while another check is timed on this GPU
        make_cuda_context()


def make_cuda_context() -> None:
    import torch
    import triton

    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    driver = triton.runtime.driver.active
    driver.get_current_stream(driver.get_current_device())


def autotune_without_benchmarks() -> None:
    """In the interpreter, let @triton.autotune pick its first config instead of timing them all.

    Timing needs a GPU; without this an autotuned kernel with several configs cannot run on a CPU.
    """
    from triton.runtime.autotuner import Autotuner

    def first_config_wins(self, *args, config=None, **kwargs):
        return [float(self.configs.index(config))] if config in self.configs else [0.0]

    Autotuner._bench = first_config_wins


def numpy_shim() -> bool:
    """Let Triton's (< 3.9) interpreter run on numpy >= 2.4. True when the fix is in place.

    The interpreter turns a one-element block into a Python int with int(array), which numpy 2.4
    refuses for arrays that are not 0-dimensional ("only 0-dimensional arrays can be converted to
    Python scalars"); `.item()` accepts any one-element array.
    """
    import numpy as np

    try:
        import triton.runtime.interpreter as interpreter
    except ImportError:
        return False
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "numpy_shim", False):
        return original is not None

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).item()))

    patch_lang_tensor.numpy_shim = True
    interpreter._patch_lang_tensor = patch_lang_tensor
    return True
