"""The course grader: `python -m checks N [--file F] [--solution] [--json]`.

The words the grader's code and text use, each for one thing:

- grading process: a process the grader starts (`engine.processes`) that runs `engine.grading_process.main` in
  one role: record (it runs the learner's code, whose launches are written down as a plan, not run) or replay
  (it performs that plan with the kernels built from the source). The grader never runs the learner's code in
  its own process: the grading processes run it, and the grader judges what they report.
- stage: one mode of grading a submission, on the GPU or in Triton's interpreter; each stage runs a recording
  and a replaying grading process. On a machine without a GPU the interpreter stage is the only one; on a GPU,
  the interpreter stage runs beside the GPU stage, on the small CPU cases.
- part: a share of the interpreter stage's cases where that stage runs beside the GPU stage, graded like a
  stage of its own by its own grading processes (`engine.judging.interpreter_parts` deals the cases and merges
  the parts' verdicts into the stage's).

The rooms of checks/engine, one per role around the plan contract (pyproject.toml's import contracts check them):

    engine.contract        what passes between the roles: the plan (contract.plan) and the kernel source
                           (contract.kernel_source, checked against the kernel language's table,
                           contract.kernel_language), the job and the events on the wire, with their one writer
                           (contract.protocol: Job, Events; read by checks.typed_reader), the observation of a
                           replayed case (contract.observations), the fork server's messages (contract.messages). It
                           imports no room.
    engine.record          what runs beside the learner's host code in the recording process: its job
                           (record.record_job: seal the process, record each case's plan and report it), the plan
                           recorder (record.plan_recorder: launches, allocations, copies written down, never run),
                           driven in one place for every plan (record.recorded_call.record_plan: set it up, call the
                           function, collect the plan), the plan once more at the puzzle's largest sizes, on tensors
                           without storage (record.largest), and a map's plan (record.map_plan).
    engine.replay          the replay process's job (replay.replay_job: check the grader's files, replay each case,
                           time on request): build the kernels from the checked text (replay.kernels), perform a plan
                           (replay.perform), observe a case (replay.case_runner, replay.launches), probe the plan at
                           the largest sizes for offsets that wrap (replay.overflow), time it (replay.measure);
                           perform a map's plan under the access recorder (replay.map_log).
                           Record and replay never import each other, nor the judge; the answer key, read, kept and
                           replayed in one module (engine.answer_key: its plan recorded with record_plan and
                           performed by the replay), stands beside both, and the grading process's entry hands it to
                           the replay.
    engine.judging         the judge, in the grader's own process: the stage that runs the two processes and judges
                           what they report (judging.stage, judging.interpreter_parts), the configs an autotuner may
                           choose (judging.configs), the plans' rules (judging.plans, with judging.mma_waits for the
                           Gluon kernels' waits; judging.largest for the plan at the largest sizes), the cases
                           (judging.judge, with the rules of judging.rules: the rulebook, core, method, decoding,
                           prefill, launch_order, compare, overflow), the timing verdict (judging.timing) and the
                           wording (judging.wording). It imports neither process's room.
    engine.grading_process only the processes' entry points: main (a grading process: its machine, then its role's
                           job, done in that role's room), fork_server, recording (the map's process: sealed, its
                           plan recorded in the recording room, then replayed in the replay room); nothing of the
                           engine imports them.
    engine.processes       starting, running and sealing processes (spawn, prestart, run, forking, process_table,
                           access_recording); the seals of a process that runs the learner's code: hardening (an
                           audit hook) and landlock (the kernel's seal, Landlock and a seccomp filter on sockets,
                           which writers in C meet too), which the recording and the replay both put on;
                           no_processes (the recording's seccomp filter on fork, exec and clone); sealing (the
                           grader's: nothing a grading process started outlives it).
    engine.access          the interpreter's access log: recorded in the replay (recorder, patches, regions), read
                           by the judge (log, queries, traffic).
    below them             engine.timing (the timing's arithmetic and clock, below the replay and the bench),
                           engine.learner_output (the learner's exception and printed output, as a report shows them,
                           for the recording and the replay), engine.inputs, engine.machine, engine.submission,
                           engine.patching, engine.phases, engine.compiler_arguments (the interpreter types a
                           kernel's scalars as Triton's compiler does), engine.lean_interpreter,
                           engine.interpreted_launch (a launch bound as the interpreter binds it).

How a submission is graded:

    checks.__main__            at a terminal, hand the command to a warm grader (checks.warm, the client;
                               checks.warm_server, which imported torch once) that runs checks.cli
    checks.cli                 parse the command, then checks.learner.session.check_session (which a notebook's
                               check() runs too): engine.grade.grade() in grading processes started ahead, then
                               the failure's picture and the verdict recorded for `make progress`; under make, a
                               failure ends with what make's own last line means (checks.make_notes)
      engine.grade             prepare the code (engine.submission: a notebook's graded cell or a file, after the
                               code of the step it builds on, earlier_step: 9 on 9a, 10 on 10b) and run the
                               stage(s); on a GPU, engine.judging.interpreter_parts deals the interpreter
                               stage's cases to its parts, recorded on the GPU as the GPU stage records;
                               engine.judging.configs judges in the interpreter every config an autotuner runs on a
                               GPU, on cases as large as its tiles
        engine.judging.stage   read the kernels from the source (engine.contract.kernel_source) before any code runs;
                               then
          record                 the recording grading process (engine.grading_process.main, role record, does
                                 engine.record.record_job: the learner's code runs there, sealed by
                                 engine.processes.hardening, landlock and no_processes):
                                 engine.record.plan_recorder writes down each case's plan on two draws with other
                                 data values; engine.processes.sealing: nothing it started may outlive it
          judge the plans        engine.judging.plans: kernels outside the language, a Gluon kernel that reads a
                                 warpgroup MMA's result before a wait retires it (engine.judging.mma_waits, from the
                                 text), kernels not in the source, host computations that reach a kernel or an
                                 output, a plan that changed with the data
          replay                 the replaying grading process (engine.grading_process.main, role replay, does
                                 engine.replay.replay_job; started beside the recording one, its job on a pipe):
                                 engine.replay builds the kernels from the checked text and performs each plan on
                                 inputs drawn with a secret data seed (a debugging run's, --seed, comes from its
                                 seed; engine.inputs), under checks.memory's guard bands and poison and (in the
                                 interpreter) engine.access's recorder of every load and store;
                                 engine.replay.measure times the replays (GPU)
          engine.judging.judge   (in the grader) re-derive inputs and reference, load the replay's outputs, apply
                                 the rules in the order of engine.judging.rules.rulebook
          engine.judging.timing  the timing verdict on the GPU times, and the answer at the timing size
          engine.judging.wording the verdict when a grading process could not grade, or did not finish
      checks.verdict           the verdict as data and as text

Registry: `puzzles.yaml` read by `checks.registry`; each puzzle's inputs and reference in `checks.puzzles.pNN_slug`, its
inputs drawn in the guarded memory of `checks.memory` (which the engine judges too, and which imports nothing of
either). Commands for learners are in `checks.learner` (hints, progress, doctor, pictures, access maps, notebook
helpers, one check as `make check` and check(N) run it), for instructors in `checks.instructor` (solutions, class
grading, bench, HTML), for course authors in `checks.authoring` (notebook build, learner stubs from the answer keys,
known-wrong kernels, figures); the benchmark's results.csv, which the figures draw, is read and written by
`checks.bench_results`. Triton is patched in one place per concern: `engine.record.plan_recorder` (launches
written down, not run, while the learner's function records), `engine.replay.launches` (the replay's launches),
`engine.access.patches` (every access, for the access log), `engine.machine` (the interpreter's autotuner and the
numpy shim), `engine.compiler_arguments` (the interpreter's scalar arguments, typed as Triton's compiler types
them); what is patched for a block is put back after it by `engine.patching`. An access log for a map is
recorded and replayed in a process of its own, started and sealed as every grading process is
(`engine.processes.access_recording` runs `engine.grading_process.recording`, whose two parts live in their rooms:
`engine.record.map_plan` records, `engine.replay.map_log` replays).

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
