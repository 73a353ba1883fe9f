"""Grading processes: start them (`spawn`; on a CPU, forked by a fork server that imported torch once, `forking`),
start them ahead of their check (`prestart`), run one to its end under a time limit, reading its checked event
stream (`run`), and seal a process that runs the learner's code: the audit hook (`hardening`), the kernel's Landlock
seal (`landlock`), no process started from it (`no_processes`), nothing it started left behind (`sealing`, reading
/proc through `process_table`). `access_recording` runs the recording of an access log for a map in a process of its
own, started and sealed as a grading process is."""
