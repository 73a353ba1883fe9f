"""The course grader: `python -m checks N [--file F] [--solution] [--json]`.

How a submission is graded (one stage; on a GPU a second, in the interpreter, runs beside it):

    checks.__main__                at a terminal, hand the command to a warm grader (engine.warm, the client;
                                   engine.warm_server, which imported torch once) that runs checks.cli
    checks.cli                     parse the command, then engine.grade.grade()
      engine.grade                 prepare the code (notebook cell or file) and run the stage(s); on a GPU
                                   engine.interpreter_parts shares the interpreter stage's cases among processes
        engine.verdicts.Stage      start the grading process and judge its report as it comes
          engine.process           the grading process: time limit, token, checked event stream
                                   (engine.spawn starts and stops it; engine.prestart starts it ahead of its check;
                                   engine.sealing: result files sealed by digest, no process left behind)
            engine.child           (in the grading process) engine.hardening's audit hook first, then
                                   load the learner's code (after the code of the step it builds on,
                                   engine.source.earlier_step: 9 on 9a, 10 on 10b), and for each case
              engine.observe         draw the inputs from the seed, call the function inside the watchers
                engine.memory          guard bands and poison around every tensor
                engine.tracking        launches, allocations, loads (in the interpreter)
                engine.access_patches  every load and store (in the interpreter), for the access log:
                                       engine.access_recorder tallies them by engine.access_regions
                engine.torch_watch     torch arithmetic done by the learner's own lines
                engine.provenance      fingerprints of memory around every launch: what the host computed
              -> observations (engine.observations) and the access log (engine.access_log), never a verdict
          engine.protocol          what the grading process may say, in which order
          engine.judge             (in the grader) re-derive inputs and reference, load returned tensors
            engine.rulebook        the rules, in order: engine.core_rules, engine.torch_rule, ...,
                                   engine.provenance_rules
            engine.method_rules    how the kernels walked memory, from the access log (engine.access_records);
                                   engine.order_rule, puzzle 4's launch order
          engine.timing            GPU times (engine.measure, in the grading process, in the interleaved
                                   rounds of engine.fair_timing), judged here
          engine.endings           the verdict when the grading process could not grade, or did not finish
      checks.verdict               the verdict as data and as text

Registry: `puzzles.yaml` read by `checks.registry`; each puzzle's inputs and reference in
`checks.puzzles.pNN_slug`. Commands for learners are in `checks.learner` (hints, progress, doctor,
pictures, notebook helpers), for instructors in `checks.instructor` (solutions, class grading,
bench, HTML), for course authors in `checks.authoring` (notebook build, known-wrong kernels,
figures). Triton is patched in one place per concern: `engine.tracking` (launches, loads),
`engine.access_patches` (every access, for the access log), `engine.environment` (the interpreter's
autotuner and the numpy shim).

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
