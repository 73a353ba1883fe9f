"""The child side: what runs in the grading process, beside the learner's code. It observes and reports,
never judges: `main` (the process), `observer` (one call inside the watchers), `launches` and `torch_watch`
(the watchers), `machine` (facts about this machine and Triton), `measure` (GPU times)."""
