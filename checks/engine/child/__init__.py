"""The child side: what runs in the grading process, beside the learner's code. It observes and reports,
never judges: `main` (the process), `case_runner` (one case, called inside the watchers), `launches` and
`torch_watch` (the watchers), `machine` (facts about this machine and Triton), `measure` (GPU times),
`recording` (a submission's access log for a map, in a process of its own), and `fork_server` (a process that
imported what `main` needs once and forks grading processes from itself, in the interpreter)."""
