"""Only the processes' entry points, which nothing of the engine imports (checks/__init__.py says what a grading process
is): `main` (a grading process: its machine, then the job of its role, done in that role's room,
`checks.engine.record.record_job` or `checks.engine.replay.replay_job`), `fork_server` (a process that imported what
`main` needs once and forks grading processes from itself, in the interpreter), and `recording` (the map's process,
not a grading process: sealed, it records a plan in the recording room, `checks.engine.record.map_plan`, and replays
it under the access recorder in the replay room, `checks.engine.replay.map_log`: the access log a map draws)."""
