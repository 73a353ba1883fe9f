"""The replay room: the replay process's job (`replay_job`) performs each recorded plan with the submission's kernels,
from their source, and reports what each case did; it never judges.

No line of the learner's host code runs here: `kernels` builds the kernels from the source text the grader read
before the learner's code ran (checked by `checks.engine.contract.kernel_source`), and `perform` allocates, copies and
launches what the plan says, on inputs this process drew itself with values no other process has seen;
`case_runner` observes a case with `launches` watching its launches, and `measure` times the replays on a GPU beside
the answer key's (which `checks.engine.grading_process.main` hands it: `checks.engine.answer_key` stands beside this
room and the recording one). `map_log` performs a map's plan (recorded in the recording room's `map_plan`) under the
access recorder, in the map's process. It imports neither the recording room nor the judge.
"""
