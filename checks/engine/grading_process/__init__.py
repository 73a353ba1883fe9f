"""What runs in the grading processes (checks/__init__.py says what they are), never judging. `main` is both
grading processes of a stage: the recording process, where the learner's function runs and `plan_recorder`
writes down its plan (no kernel runs there; `hardening` keeps the learner's code off the grader's files and
processes), and the replay process, where `case_runner` performs each plan (`checks.engine.replay`) with
`launches` watching the launches it makes; `machine` (facts about this machine and Triton), `measure` (GPU times
of the replays), `recording` (the access log a map draws, recorded and replayed in a process of its own, not a
grading process), and `fork_server` (a process that imported what `main` needs once and forks grading processes
from itself, in the interpreter)."""
