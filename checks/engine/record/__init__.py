"""The recording room: what runs beside the learner's host code in the recording process. Its job (`record_job`:
seal the process, load the submission, record each case's plan and report it), the plan recorder (`plan_recorder`,
with Gluon's tensor descriptors as plan values, `descriptors`): launches, allocations and copies written down, never
run, and the one place the recorder is driven (`recorded_call.record_plan`: set it up, call the function, collect the
plan) for every plan recorded: a case's, the plan at the largest sizes (`largest`), a map's (`map_plan`: the map's
process records there, then replays in the replay room) and the answer key's (`checks.engine.answer_key`). The seals
it puts on the process are the processes' (`checks.engine.processes.hardening`, `landlock`, `no_processes`), the first
two of which the replay puts on too. It imports neither the replay room nor the judge."""
