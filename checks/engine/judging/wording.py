"""The wording of verdicts that `checks.engine.judging.stage.Stage` gives beside the rules' own sentences.

When the process ended with an `ending` event (the machine is unfit, the learner's code does not load,
or it lacks the names the puzzle needs), when it ran out of time, died or exited before its report was
complete, when its report was forged, when one of the grader's rules broke, and the advice under a
failure: which case parameter separates failing from passing cases, and how to draw the access map; and what
Triton's common errors mean, in a sentence each beside the raw error.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

from checks import verdict as V
from checks.engine.contract.protocol import Ending, Environment, LoadError, Stream
from checks.engine.processes.run import ProcessEnd
from checks.engine.submission import defined_names
from checks.registry import UnknownPuzzle, get_puzzle, shown


def ending_verdict(v: V.Verdict, ending: Ending) -> None:
    """The grading process could not grade: the machine, code that does not load, or missing names."""
    if isinstance(ending, Environment):
        v.status, v.summary = V.ENVIRONMENT, ending.problem
    elif isinstance(ending, LoadError):
        v.status = V.ERROR
        v.details = [f"Loading your code raised {ending.text}", *ending.where]
        v.summary = "Your code did not load: fix the error above and check again."
        if ending.step:
            step = ending.step
            v.summary = (
                f"Your step {step} code, which this puzzle builds on, did not load: fix step {step} first (its own "
                "check passes), then check this one again."
            )
    else:
        v.status = V.ERROR
        v.summary = f"Your code does not define {', '.join(ending.names)}: keep the function name from the stub."


_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<name>\S+)', re.MULTILINE)


# the interpreter's builders of a kernel's memory accesses, as a crash's inner frames name them
_ACCESSES = {"load": "a load", "store": "a store", "atomic": "an atomic", "gather": "a load", "scatter": "a store"}


def learner_frame(output: str, names: dict[str, str]) -> str:
    """The learner's innermost frame in a crash's stack dump (faulthandler, most recent call first):
    ' Your code was at p1.py, line 12 (in vector_add) when it died.', or '' when none of its frames is there. `names`
    maps a file's path, or the name the replay compiled a file of kernels under, to how messages name it; where the
    frames inside the learner's were the interpreter performing a load or a store of a kernel, the sentence names it
    as the access that faulted."""
    inner: list[str] = []
    for match in _FRAME.finditer(output):
        label = names.get(match["path"], names.get(Path(match["path"]).name))
        if label is None:
            inner.append(match["name"])
            continue
        where = f"{label}, line {match['line']} (in {match['name']})"
        builders = [name.removeprefix("create_") for name in inner if name.startswith("create_")]
        access = next((_ACCESSES[word] for name in builders for word in _ACCESSES if word in name), "")
        if access:
            return (
                f" It died in {access} of your kernel at {where}: its address there is outside every tensor (past "
                "the guard bands around them, so it reached memory this process does not have); look at the "
                "offsets, strides and mask of that line."
            )
        return f" Your code was at {where} when it died."
    return ""


def hangs_on_a_barrier(number: int | str) -> bool:
    """Whether a puzzle's kernels wait on mbarriers (the Hopper track, in Gluon), so that a kernel that never ends
    is said as one waiting on a barrier."""
    try:
        return get_puzzle(number).needs_hopper
    except UnknownPuzzle:
        return False


_DUMP_LINE = re.compile(
    r'^(Fatal Python error: |Current thread 0x|Thread 0x|Stack \(most recent call first\)|  File "[^"]+", line \d+ in |'
    r"  <no Python frame>|  Garbage-collecting|Extension modules: |Python runtime state: )"
)


def without_fault_dump(output: str) -> str:
    """What the grading process printed, without the stack dump that faulthandler writes when it dies, even where the
    tail kept of the output starts inside it: its frames are the grader's as much as the learner's (`learner_frame`
    names the learner's line from them), and none of it is what the learner's code printed."""
    kept, dumping = [], False
    for line in output.splitlines():
        if _DUMP_LINE.match(line):
            dumping = True
        elif not (dumping and not line.strip()):
            dumping = False
            kept.append(line)
    return "\n".join(kept) + ("\n" if kept and output.endswith("\n") else "")


def _in_the_grader(output: str) -> str:
    """Where a crash's stack dump shows only the grader's frames: a sentence that says so."""
    if "Fatal Python error: " not in output or not _FRAME.search(output):
        return ""
    return (
        " It died inside the grader's own code (the replay that performs your kernels' loads and stores), at no "
        "line of yours its stack shows: look at the loads and stores of the kernels this case launches."
    )


def unfinished_verdict(
    v: V.Verdict, end: ProcessEnd, stream: Stream, timeout: float, file: str = "", names: dict[str, str] | None = None
) -> None:
    """The grading process ran out of time, died, or exited before its report was complete."""
    current = stream.started
    if current is not None:
        where = f" during case {current + 1}"
    elif stream.at_timing_size:  # every case recorded: the call at the timing size, or its host time, was running
        where = " running your function at the timing size, after every case"
    else:
        where = " while loading your code" if stream.machine else " while starting"
    if end.timed_out and hangs_on_a_barrier(v.puzzle):
        v.status = V.TIMEOUT
        v.summary = (
            f"Your code ran past the {timeout:.0f} s time limit{where}: a Gluon kernel that never ends is most often "
            "waiting on an mbarrier that never completes (a wait on the wrong phase, an expect of more bytes than "
            "the copies bring, an arrive that never comes); check each wait's phase against the number of times "
            "its barrier has completed."
        )
        return
    if end.timed_out:
        v.status = V.TIMEOUT
        v.summary = (
            f"Your code ran past the {timeout:.0f} s time limit{where}: look for a loop whose bound never "
            "changes or is far too large (a `while` in a kernel, a grid of the wrong size); if it is only "
            "slow (autotuning many configs compiles each one), give it longer with --timeout "
            f"({V.make_command('check', v.puzzle, file, '--timeout 300')})."
        )
        return
    v.status = V.CRASHED
    code = end.returncode if end.returncode is not None else 0
    how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    frame = learner_frame(end.output or "", names or {})
    failed = [c for c in v.cases if not c.passed]
    if failed:
        first = failed[0]
        v.summary = (
            f"The grading process died{where} ({how}), after {len(failed)} case(s) had already failed; "
            f"start with case {first.index + 1} ({first.description}): {first.problem}"
        ) + frame
    elif code >= 0:
        v.summary = (
            f"Your code ended the grading process{where} ({how}) before it could give a verdict: "
            "remove any exit(), sys.exit() or os._exit() call from your submission."
        )
    elif code == -signal.SIGKILL:
        v.summary = (
            f"The grading process was killed{where} (signal SIGKILL), most likely for using too much memory: "
            "check the sizes you allocate and your grid."
        )
    else:
        v.summary = (
            f"The grading process died{where} ({how}); this is usually an out-of-bounds load or store: "
            "check your masks, offsets and strides."
        ) + (frame or _in_the_grader(end.output or ""))


_TRACEBACK_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)', re.MULTILINE)


def grader_error_verdict(v: V.Verdict, text: str, names: dict[str, str]) -> None:
    """The grading process's own code raised (`text`, its traceback): the grader's error, unless the traceback
    passes through the learner's code (then what the learner's code returned or left behind broke it)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else "an exception"
    ours = [m for m in _TRACEBACK_FRAME.finditer(text) if m["path"] in names]
    if ours:
        frame = ours[-1]
        v.status = V.ERROR
        v.summary = (
            f"Your code raised {last} inside the grader, at {names[frame['path']]}, line {frame['line']} "
            f"(in {frame['name']}): fix it there and check again."
        )
        return
    v.status = V.INTERNAL
    v.summary = (
        f"The grader itself failed ({last}): this is an error in the grader, not in your code; check again, and "
        "if it happens again, show your instructor the lines below."
    )
    v.details = lines[-12:]


TAMPERED_SUMMARY = (
    "The grading process's report was incomplete or forged ({why}), so this submission was not graded: "
    "remove any code that writes to the grader's files, reaches into its objects, replaces its functions or "
    "starts a process that outlives the grading, then check again."
)

RULE_FAILED_SUMMARY = (
    "The grader's rule {error} broke while judging your code: this is an error in the grader, not in your "
    "code; check again, and tell your instructor if it happens again."
)


def map_advice(number: int | str, case: int = 0, file: str = "", earlier: str = "", seed: int | None = None) -> str:
    """How to draw the access map of case index `case`: numbered from 1, as the report's case lines and
    `make map`'s --case and show()'s case= number them, on the inputs of `seed`."""
    case_flag, seed_flag = f"--case {case + 1}" if case else "", f"--seed {seed}" if seed is not None else ""
    flags = " ".join(flag for flag in (case_flag, seed_flag) if flag)
    command = V.make_command("map", number, file, flags, earlier)
    given = "".join((f", case={case + 1}" if case else "", f", seed={seed}" if seed is not None else ""))
    notebook = f", or show({V.puzzle_literal(number)}{given}) in the notebook"
    where = "" if file or earlier else notebook  # show() maps the notebook's code, not the files graded
    return f"{MAP_ADVICE_START} of case {case + 1}: {command}{where}, beside the answer key's."


MAP_ADVICE_START = "To see which program loaded what, draw the access map"


def _cases(indices: list[int]) -> str:
    return ("case " if len(indices) == 1 else "cases ") + ", ".join(str(i + 1) for i in indices)


def cause_over_cases(
    failed: list[V.CaseResult], number: int | str, file: str = "", seed: int | None = None, interpreter: bool = True
) -> None:
    """Keep the cause the first failing case names only when it is proven over every failing case: the one mistake
    whose reference gives the values of each (`mistakes.proven`). Else its line says what is known instead (which
    failing cases that mistake gives, which it does not) and the command that shows another failing case; and a
    proven mistake the first case names second is put first."""
    from checks.engine.judging.rules import mistakes

    first = failed[0]
    if not first.stated or not first.details:
        return
    name = mistakes.proven([r.fits for r in failed], [r.degenerate for r in failed])
    if name is not None and name in first.fits:
        first.details[0] = first.fits[name]
        return
    stated = mistakes.BY_NAME[first.stated]
    fit = [r.index for r in failed if first.stated in r.fits]
    other = [r for r in failed if first.stated not in r.fits]
    alike = [mistakes.BY_NAME[n].label for n in first.fits if n != first.stated]
    text = f"No cause is proven: the reference with {stated.label} gives the values of {_cases(fit)}"
    if other:
        text += f", but not those of {_cases([r.index for r in other])}, which fail{'s' if len(other) == 1 else ''} too"
    if alike:
        text += f"; on case {first.index + 1} so does the reference with {' and with '.join(alike)}"
    if all(r.degenerate for r in failed if r.index in fit):
        text += (
            f" ({_cases(fit)} {'has' if len(fit) == 1 else 'have'} a sequence of one row or one key, where several "
            "mistakes give the same values: such a case decides nothing alone)"
        )
    text += ". Where your values are wrong is said below"
    if other:
        case = other[0].index
        flags = f"--case {case + 1}" + (f" --seed {seed}" if seed is not None else "")
        command = V.make_command("map" if interpreter else "check", number, file, flags)
        if interpreter and not file:  # show() maps the notebook's code, as make map maps the saved notebook
            given = f", case={case + 1}" + (f", seed={seed}" if seed is not None else "")
            command += f", or show({V.puzzle_literal(number)}{given}) in the notebook"
        text += f"; look at case {case + 1} as well ({other[0].description}): {command}"
    first.details[0] = text + "."
    first.cause = False
    first.diagnosed = False


def earlier_stub_summary(number: int | str, step: str, label: str, file: str = "") -> str:
    """The step this puzzle builds on is still the stub: in its notebook (then --earlier is the other way to give
    it), or in the file given with --earlier."""
    solve = f"Puzzle {number} builds on your step {step} code, and that is still the stub ({label}): solve step {step}"
    if label != f"your step {step} code in {shown(get_puzzle(step).notebook)}":  # the file given with --earlier
        return f"{solve} there first (its check passes), then check this one again."
    command = V.make_command("check", number, file, "", "YOUR_STEP_FILE.py")
    return (
        f"{solve} first (its check passes, then save the notebook) and check this one again, or, if your step "
        f"{step} code is in a file of its own, give it with --earlier: {command}."
    )


def earlier_step_advice(
    step: str, case: int, launched: set[str], files: tuple[Path, Path], label: str, seed: int
) -> list[str]:
    """A line when the first failing case launched only kernels of the step this puzzle builds on (9 on 9a): that
    case ran none of the puzzle's own kernels, so the fault is in the step's code, and its own check finds it.
    `files` are (the graded file, the step's file), `label` how the step's code is named (earlier_step)."""
    own, earlier = (_kernel_names(path) for path in files)
    kernels = sorted(launched)
    if not kernels or any(k in own or k not in earlier for k in kernels):
        return []
    prefix = f"your step {step} code in "
    given = label[len(prefix) :] if label.startswith(prefix) else ""
    notebook = shown(get_puzzle(step).notebook)
    if given:
        command = V.make_command("check", step, "" if given == str(notebook) else given, f"--seed {seed}")
        how = f"check step {step} on its own first: {command}"
    else:  # cells run in a notebook session
        how = f"check step {step} on its own first: check({V.puzzle_literal(step)}) in its notebook"
    names = ", ".join(f"`{k}`" for k in kernels)
    source = f"in {given}" if given else f"from {label}"
    return [
        f"Case {case + 1} launched only kernels of your step {step} code ({names}, {source}): the mistake is in that "
        f"code, not in this puzzle's; {how}."
    ]


def _kernel_names(path: Path) -> set[str]:
    """The names a module file defines at its top level; none when it cannot be read or parsed."""
    try:
        return defined_names(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError):
        return set()


# the tags that name what kind of input a case has come before shapes and sizes when looking for what
# separates the failing cases: "every failing case has fill=neg_inf" is a cause, a shape rarely is
TAGS = ("layout", "layout_a", "layout_b", "fill", "causal")
_SIZES = ("shape", "n", "M", "N", "K", "B", "H", "D")


def _non_contiguous(case: dict[str, Any]) -> bool:
    """Whether a case has an input that is a strided view (a `layout` tag other than the default)."""
    return any(key.startswith("layout") and value not in (None, "contiguous") for key, value in case.items())


def failure_pattern(params: list[dict[str, Any]], passed: list[bool], cause: bool = False) -> list[str]:
    """A line when one case parameter separates the failing cases from the passing ones.

    Only when several cases fail (one failing case is separated from the rest by any of its parameters, so
    naming one would point the wrong way), and never beside a `cause` the first failure's report already
    names (a scale left out passes the cases where it is 1, whatever their H: the split would contradict
    it); the tags (layout, fill, causal) are tried before sizes, and a failure on exactly the cases with a
    non-contiguous input is named as such.
    """
    if cause or sum(not ok for ok in passed) < 2 or all(passed) or not any(passed):
        return []
    strided = [_non_contiguous(p) for p in params]
    if all(s for s, ok in zip(strided, passed, strict=True) if not ok) and not any(
        s for s, ok in zip(strided, passed, strict=True) if ok
    ):
        layouts = sorted({str(v) for p, ok in zip(params, passed, strict=True) if not ok for k, v in p.items()
                          if k.startswith("layout")})  # fmt: skip
        return [
            f"Every failing case has a non-contiguous input (layout={' or '.join(layouts)}), and every case with "
            "contiguous inputs passes: some offset is right only where the tensors are contiguous. Look at each "
            "load and store: its offsets should use the strides of the tensor it reads or writes (x's for x, "
            "out's for out), passed from the host (x.stride(0), x.stride(1), ...), not another tensor's nor a "
            "stride computed from the shape."
        ]
    keys = list(dict.fromkeys(k for p in params for k in p if k != "note"))
    keys.sort(key=lambda k: 0 if k in TAGS else 2 if k in _SIZES else 1)
    for key in keys:
        failing = {str(p.get(key, "(default)")) for p, ok in zip(params, passed, strict=True) if not ok}
        passing = {str(p.get(key, "(default)")) for p, ok in zip(params, passed, strict=True) if ok}
        if len(failing) == 1 and not failing & passing:
            (value,) = failing
            return [
                f"Every failing case has {key}={value}; all cases with {key}={' or '.join(sorted(passing))} pass: "
                "look at what your code does differently there."
            ]
    return []


# Triton's common errors, each with a sentence that says what it means and what to do next; the raw error is
# reported too. The first pattern found in the error's text gives the sentence.
TRITON_ERRORS: tuple[tuple[str, str], ...] = (
    (
        r"Cannot make_shape_compatible|Cannot broadcast",
        "two blocks in one operation have shapes that do not fit together (a mask, offsets or values of another "
        "shape than the pointers they go with, such as a 1-D mask on a 2-D block of pointers): give them the same "
        "shape, with [:, None] for rows and [None, :] for columns.",
    ),
    (
        r"(Mask|Value|Other) argument cannot be block type if pointer argument is not a block"
        r"|Expected pointer argument to have shape",
        "a block of values or of mask lanes goes with a pointer of another shape: add the block of offsets "
        "(built from tl.arange) to the pointer, so that it points at one element per lane.",
    ),
    (
        r"arange's range must be a power of 2",
        "tl.arange(start, end) needs end - start to be a power of two (16, 32, 64...): round the block size up "
        "(triton.next_power_of_2) and mask the lanes past the end.",
    ),
    (
        r"arange's arguments must be of type tl.constexpr|is not a constexpr",
        "a size that shapes a block must be known when the kernel compiles: pass it as a `BLOCK: tl.constexpr` "
        "parameter of the kernel, not as an ordinary argument.",
    ),
    (
        r"Unsupported ptr type .* in `tl\.(load|store)`",
        "tl.load and tl.store take pointers: pass the tensor itself to the kernel and add integer offsets to it, "
        "not a number read from it.",
    ),
    (
        r"Input shapes should have M >= ",
        "tl.dot needs blocks of at least 16 along every dimension: make each block size 16 or more and mask the "
        "lanes the data does not fill.",
    ),
    (
        r"are not compatible for matmul|Both inputs must be either 2D or 3D",
        "tl.dot(a, b) needs 2-D blocks with a's last dimension equal to b's first: check the two shapes, and "
        "transpose one with tl.trans where needed.",
    ),
    (
        r"Both operands must be same dtype",
        "tl.dot's two blocks must have one dtype: convert one before the product (p.to(v.dtype), say).",
    ),
    (
        r"invalid operands of type pointer|cannot add pointers together",
        "arithmetic between two pointers, or between a pointer and a float: only integer offsets may be added to a "
        "pointer.",
    ),
    (
        r"Mask must have boolean scalar type",
        "a mask must be a block of booleans, a comparison such as offsets < n, not numbers.",
    ),
    (
        r"Cannot call @triton\.jit'd outside of the scope of a kernel",
        "a @triton.jit function was called as plain Python: launch a kernel with kernel[grid](...), and call other "
        "@triton.jit functions only from inside a kernel.",
    ),
    (
        r"Did you forget to add @triton\.jit",
        "a tl.* function was called outside a kernel, or from a helper without @triton.jit: call tl.* only in "
        "functions decorated with @triton.jit.",
    ),
)


# errors the grading process itself causes, by sealing the recording process
SEALED_ERRORS: tuple[tuple[str, str], ...] = (
    (
        r"^PermissionError: \[Errno 1\] Operation not permitted",
        "your host code tried to start a process (multiprocessing, subprocess, os.fork), which the process that "
        "records your function never does: compute in your kernels, in this process.",
    ),
)


def triton_error_gloss(raised: str) -> list[str]:
    """A line that says what a common Triton error (or the sealed recording's refusal) means and what to do next;
    none for any other error."""
    for pattern, meaning in TRITON_ERRORS:
        if re.search(pattern, raised):
            return [f"What Triton's error means: {meaning}"]
    for pattern, meaning in SEALED_ERRORS:
        if re.search(pattern, raised):
            return [f"What the error means: {meaning}"]
    return []
