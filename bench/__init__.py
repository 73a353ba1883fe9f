"""The course's benchmark and tuning tools for GPU machines, run as `python -m bench COMMAND` from the course root
(`python -m bench --help` lists the commands). What they measured is in bench/results/, one folder per run with a
README saying the command, commit, GPU and versions; bench/tuning.md is the index of the findings.

`make bench` itself is `checks.instructor.bench`: the grader package (checks/) imports nothing from here.
"""
