"""The timeline of one program of a Hopper answer key (16a, 16b, 16): which warp does which phase when.

Each key has an instrumented copy, made from the key itself by the edits of `bench/instrumented/NN_slug.edit.yaml`
(each `old` must occur exactly once, as a known-wrong kernel's edits must, so the copy follows the key and fails
loudly when it no longer applies): Proton's `pl.enter_scope` / `pl.exit_scope` around each phase, which Triton 3.6
compiles in `@gluon.jit` kernels (Proton's language enables Gluon's semantic by default). The file also gives the
case the timeline runs at (about one wave of programs, so that the trace stays small) and which warps play which
part (`roles`). The key's own file stays as the learner reads it.

`python -m bench warp-timeline STEP [--out DIR]` (which `make profile` runs in a process of its own) draws it:
`record(step, out)` runs the copy under Proton's instrumentation backend (a timeline trace in Chrome's trace format,
each warp's scopes timed by the SM's clock, one buffer per program in global memory, so that the key's shared memory
is left whole) and `draw(...)` turns the trace into a PNG: one lane per warp, labelled with its part, a bar per scope.
`spans(trace)` reads the trace: each event's `pid` is "<kernel> Core<SM> CTA<program>", its `tid` "warp <w> (line
<n>)" (a second line where scopes of one warp overlap); `ts` and `dur` are the SM's clock cycles divided by the
frequency its `args` give ("Frequency (MHz)", which Proton assumes to be 1000: its trace shows cycles as if the clock
ran at 1 GHz), so cycles = ts x that frequency. The cycles of one program's warps are read from one SM's clock, so
they compare; the picture and the phase table give them as cycles, not as seconds, since the SM's clock varies.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from checks.authoring.wrong import answer_key_body, apply_edits
from checks.registry import ROOT, Puzzle, get_puzzle, shown

INSTRUMENTED = ROOT / "bench" / "instrumented"
STEPS = ("16a", "16b", "16")  # the steps with an instrumented copy
PROGRAM = re.compile(r"^(?P<kernel>.*) Core(?P<sm>\d+) CTA(?P<cta>\d+)")
ASSUMED_MHZ = 1000.0  # Proton's frequency for cycles where an event does not give one
WARP = re.compile(r"^warp (?P<warp>\d+)")


@dataclass(frozen=True)
class Span:
    """One scope of one warp of one program: its name, start and end in SM clock cycles from the program's first."""

    program: str
    warp: int
    scope: str
    start: float
    end: float


@dataclass(frozen=True)
class Role:
    """Warps `first` to `last` of a program (both included) play `role`."""

    first: int
    last: int
    role: str


@dataclass(frozen=True)
class Instrumented:
    """A key's instrumented copy: its source, the case its timeline runs at, and the parts its warps play."""

    source: str
    case: dict[str, Any]
    roles: tuple[Role, ...]


def edit_file(puzzle: Puzzle) -> Path:
    return INSTRUMENTED / f"{puzzle.stem}.edit.yaml"


def instrumented(step: str) -> Instrumented:
    """The instrumented copy of step's answer key (EditError when an edit no longer applies to the key)."""
    puzzle = get_puzzle(step)
    path = edit_file(puzzle)
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    body = apply_edits(answer_key_body(puzzle), spec["edits"], str(path))
    source = f'"""{spec["doc"]}"""\n\nimport triton.profiler.language as pl\n{body}'
    roles = tuple(Role(int(r["first"]), int(r["last"]), str(r["role"])) for r in spec["roles"])
    return Instrumented(source, dict(spec["case"]), roles)


def role_of(warp: int, roles: tuple[Role, ...]) -> str:
    return next((r.role for r in roles if r.first <= warp <= r.last), "")


# -- reading the trace


def spans(trace: dict[str, Any]) -> list[Span]:
    """The scopes of a Proton timeline trace (Chrome's trace format), in cycles from each program's first scope."""
    found: list[tuple[str, int, str, float, float]] = []
    for event in trace.get("traceEvents", []):
        if event.get("ph") != "X":
            continue
        program, warp = PROGRAM.match(str(event.get("pid", ""))), WARP.match(str(event.get("tid", "")))
        if program is None or warp is None:
            continue
        mhz = float((event.get("args") or {}).get("Frequency (MHz)", ASSUMED_MHZ))
        start = round(float(event["ts"]) * mhz)  # whole cycles again: the trace's division left rounding behind
        end = start + round(float(event["dur"]) * mhz)
        found.append((event["pid"], int(warp["warp"]), str(event["name"]), float(start), float(end)))
    first: dict[str, float] = {}
    for program, _, _, start, _ in found:
        first[program] = min(start, first.get(program, start))
    return [Span(p, w, s, a - first[p], b - first[p]) for p, w, s, a, b in found]


def fullest_program(found: list[Span]) -> str:
    """The program with the most scopes recorded (the first by name among equals): the one the picture shows."""
    counts: dict[str, int] = defaultdict(int)
    for span in found:
        counts[span.program] += 1
    if not counts:
        raise ValueError("the trace has no scope of any program")
    return min(counts, key=lambda p: (-counts[p], p))


def phase_table(found: list[Span], program: str, roles: tuple[Role, ...]) -> list[dict[str, Any]]:
    """Per part and scope of one program: the cycles its warps spent in that scope, averaged over the part's warps,
    and their share of the program's cycles (from its first scope to its last)."""
    mine = [s for s in found if s.program == program]
    length = max((s.end for s in mine), default=0.0)
    total: dict[tuple[str, str], float] = defaultdict(float)
    warps: dict[str, set[int]] = defaultdict(set)
    for span in mine:
        part = role_of(span.warp, roles) or f"warp {span.warp}"
        total[(part, span.scope)] += span.end - span.start
        warps[part].add(span.warp)
    rows = []
    for (part, scope), cycles in sorted(total.items()):
        average = cycles / len(warps[part])
        rows.append({"part": part, "scope": scope, "cycles": average, "share": average / length if length else 0.0})
    return rows


def phase_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The phase table as text, one line per part and scope."""
    lines = [f"  {'part':<18} {'scope':<28} {'cycles':>12} {'share':>7}"]
    lines += [f"  {r['part']:<18} {r['scope']:<28} {r['cycles']:>12.0f} {100 * r['share']:>6.1f}%" for r in rows]
    return lines


# -- the picture


def lanes(found: list[Span], program: str) -> dict[int, list[list[Span]]]:
    """Each warp's scopes in one program, spread over sub-lanes so that no two on one sub-lane overlap."""
    result: dict[int, list[list[Span]]] = {}
    for span in sorted((s for s in found if s.program == program), key=lambda s: (s.warp, s.start)):
        rows = result.setdefault(span.warp, [])
        row = next((r for r in rows if r[-1].end <= span.start), None)
        if row is None:
            rows.append([span])
        else:
            row.append(span)
    return result


def draw(found: list[Span], program: str, roles: tuple[Role, ...], title: str, path: Path) -> Path:
    """One program's timeline as a PNG at `path`: a lane per warp (labelled with its part), a bar per scope, a colour
    per scope name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    by_warp = lanes(found, program)
    names = sorted({s.scope for s in found if s.program == program})
    colours = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(names)}
    labels, y = [], 0.0
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.35 * sum(len(r) for r in by_warp.values())))
    for warp in sorted(by_warp, reverse=True):
        rows = by_warp[warp]
        for index, row in enumerate(rows):
            ax.broken_barh([(s.start, s.end - s.start) for s in row], (y, 0.8),
                           facecolors=[colours[s.scope] for s in row], linewidth=0)  # fmt: skip
            part = role_of(warp, roles)
            labels.append((y + 0.4, f"warp {warp}" + (f" ({part})" if part else "") + (f" [{index}]" if index else "")))
            y += 1.0
    ax.set_yticks([at for at, _ in labels], [text for _, text in labels], fontsize=8)
    ax.set_xlabel("SM clock cycles from the program's first scope")
    ax.set_title(title, fontsize=10)
    ax.legend(handles=[Patch(color=colours[n], label=n) for n in names], loc="upper left", bbox_to_anchor=(1.0, 1.0),
              fontsize=8)  # fmt: skip
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# -- the run (GPU)


def instrumentation_mode() -> Any:
    """Proton's instrumentation mode of the timeline: each warp's scopes timed by the SM's clock into a buffer in global
    memory (16 KiB a warp), so that the key's shared memory (up to 224 KiB in 16) stays its own."""
    import triton.profiler as proton

    return proton.mode.Default(buffer_type="global")


def record(step: str, out: Path, case: dict[str, Any] | None = None) -> Path:
    """Run step's instrumented key once at its timeline case (or `case`) under Proton's instrumentation backend; the
    trace file (Chrome's trace format) it wrote into `out`. Raises what Proton or the compiler raised, or RuntimeError
    where Proton wrote no trace."""
    import json

    import torch
    import triton.profiler as proton

    from checks.engine.submission import load_module
    from checks.memory import Arena
    from checks.puzzles import spec_module
    from checks.registry import case_from

    puzzle, copy = get_puzzle(step), instrumented(step)
    out.mkdir(parents=True, exist_ok=True)
    module_file = out / f"instrumented_{puzzle.stem}.py"
    module_file.write_text(copy.source, encoding="utf-8")
    function = getattr(load_module(module_file, f"instrumented_{puzzle.stem}"), puzzle.name)
    generator = torch.Generator(device="cuda")
    generator.manual_seed(0)
    at = case or copy.case
    inputs = spec_module(puzzle).make_inputs(case_from(at, str(edit_file(puzzle))), Arena("cuda", generator))
    name = out / f"timeline_{puzzle.stem}"
    for old in out.glob(f"{name.name}.*"):
        old.unlink()
    proton.start(str(name), data="trace", backend="instrumentation", mode=instrumentation_mode())
    try:
        function(*inputs.values())
        torch.cuda.synchronize()
    finally:
        proton.finalize()
    written = sorted(out.glob(f"{name.name}.*"))
    if not written:
        raise RuntimeError(f"Proton wrote no trace next to {name}")
    json.loads(written[0].read_text(encoding="utf-8"))  # a trace that does not parse is Proton's failure, said here
    return written[0]


def case_mapping(text: str) -> dict[str, Any]:
    """--case's value: a YAML mapping of sizes ("{D: 64}" or "D: 64"), else argparse's usage error."""
    import argparse

    value = yaml.safe_load(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} is not a mapping of sizes: write it as '{{D: 64}}'")
    return value


NEEDS_HOPPER = "The warp timeline needs a Hopper GPU (an H100 or H200): the instrumented keys use wgmma and TMA."


def main(argv: list[str] | None = None) -> int:
    """Draw step's timeline into --out; print what it shows. Exit 0 drawn, 1 not (the last line says why), 2 no Hopper
    GPU here. `make profile` runs it in a process of its own, so that a profiler that aborts takes only this down."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m bench warp-timeline", description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=STEPS, help="the Hopper step whose answer key is drawn")
    parser.add_argument("--out", type=Path, help="the folder of the picture and the trace (default profile/NN_slug/)")
    parser.add_argument("--case", type=case_mapping, default={},
                        help="sizes that replace the timeline case's, as YAML: --case '{D: 64}' (default: the "
                             "instrumented copy's case)")  # fmt: skip
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print(NEEDS_HOPPER)
        return 2
    puzzle, copy = get_puzzle(args.step), instrumented(args.step)
    out = args.out or ROOT / "profile" / puzzle.stem
    at = {**copy.case, **args.case}
    try:
        trace = record(args.step, out, at)
        found = spans(json.loads(trace.read_text(encoding="utf-8")))
        program = fullest_program(found)
    except Exception as exc:  # noqa: BLE001 - said in one line, the last, which `make profile` quotes
        print(f"No timeline: Proton's instrumentation of the answer key failed ({type(exc).__name__}: "
              f"{' '.join(str(exc).split())[:300]}).")  # fmt: skip
        return 1
    case = ", ".join(f"{k}={v}" for k, v in at.items())
    picture = draw(found, program, copy.roles, f"Puzzle {puzzle.number}, the answer key at {case}: {program}",
                   out / "timeline.png")  # fmt: skip
    phases = phase_lines(phase_table(found, program, copy.roles))
    (out / "phases.txt").write_text("\n".join(phases) + "\n", encoding="utf-8")
    print(f"The answer key's phases in one program ({program}, at {case}; Proton's scopes, in SM clock cycles):")
    print("\n".join(phases))
    print(f"Timeline: {shown(picture)} (the trace: {shown(trace)}, for chrome://tracing or Perfetto).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
