"""Grading processes: start them (`spawn`; on a CPU, forked by a fork server that imported torch once, `forking`),
start them ahead of their check (`prestart`), and run one to its end under a time limit, reading its checked event
stream and making sure nothing it started outlives it (`run`)."""
