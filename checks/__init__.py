"""The course grader: `python -m checks N [--file F] [--solution] [--json]`.

How a submission is graded (one stage; on a GPU a second, in the interpreter, runs beside it):

    checks.__main__            at a terminal, hand the command to a warm grader (checks.warm, the client;
                               checks.warm_server, which imported torch once) that runs checks.cli
    checks.cli                 parse the command, then engine.grade.grade()
      engine.grade             prepare the code (engine.submission: a notebook's graded cell or a file, after the
                               code of the step it builds on, earlier_step: 9 on 9a, 10 on 10b) and run the
                               stage(s); on a GPU, engine.judging.interpreter_parts shares the interpreter
                               stage's cases among processes
        engine.judging.stage   the loop: for each event the grading process reports, judge it; then the verdict
          engine.processes       start (spawn; on a CPU with $CHECKS_FORK_SERVER=1, forked by the fork server,
                                 engine.child.fork_server, which imported torch once: forking), start ahead of the
                                 check (prestart) and run (run.GradingProcess: time limit, token, the checked event
                                 stream) grading processes; engine.sealing: result files sealed by digest, and no
                                 process of theirs left behind
            engine.child.main    (in the grading process) engine.child.hardening's audit hook first, then load
                                 the learner's code, and for each case
              engine.child.case_runner draw the inputs (engine.inputs), call the function inside the watchers:
                engine.memory          guard bands and poison around every tensor
                engine.child.launches  launches and allocations
                engine.access.patches  every load and store (in the interpreter), for the access log:
                                       engine.access.recorder tallies them by engine.access.regions
                engine.child.torch_watch  torch arithmetic done by the learner's own lines
                engine.child.fingerprints fingerprints of memory around every launch: what the host computed
              -> observations (engine.observations) and the access log (engine.access.log), never a verdict
            engine.child.measure   GPU times, when the grader asks for them, in the interleaved rounds of
                                   engine.fair_timing, and both answers at the timing size, saved for the grader
          engine.protocol        what the grading process may say, in which order
          engine.judging.judge   (in the grader) re-derive inputs (engine.inputs) and reference, load returned tensors
            engine.rules.rulebook  the one list of rules and outcomes: engine.rules.core, torch_free, provenance,
                                   method and decoding (from the access log, read with engine.access.queries),
                                   launch_order, and report (what a complete report holds)
          engine.judging.timing  the timing verdict on the GPU times, and the answer at the timing size
          engine.judging.wording the verdict when the grading process could not grade, or did not finish
      checks.verdict           the verdict as data and as text

The judging side (engine.judging, engine.rules) never imports the child side (engine.child), and the engine
never imports the commands built on it; `make lint` checks both, and that no import goes in a circle
(pyproject.toml, [tool.importlinter]).

Registry: `puzzles.yaml` read by `checks.registry`; each puzzle's inputs and reference in
`checks.puzzles.pNN_slug`. Commands for learners are in `checks.learner` (hints, progress, doctor,
pictures, access maps, notebook helpers), for instructors in `checks.instructor` (solutions, class grading,
bench, HTML), for course authors in `checks.authoring` (notebook build, known-wrong kernels,
figures). Triton is patched in one place per concern: `engine.child.launches` (launches, allocations),
`engine.access.patches` (every access, for the access log), `engine.child.machine` (the interpreter's
autotuner and the numpy shim). An access log for a map is recorded in a process of its own
(`engine.processes.access_recording` runs `engine.child.recording`).

Nothing is imported here eagerly: `python -m checks` first makes sure this Python has torch,
triton and pyyaml (see `checks.learner.preflight`), and says which Python to use when it has not.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Puzzle", "get_puzzle", "load_puzzles"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from checks import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'checks' has no attribute {name!r}")
