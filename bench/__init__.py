"""The course's benchmark and tuning tools for GPU machines, run as `python -m bench COMMAND` from the course root
(`python -m bench --help` lists the commands). What they measured is in bench/results/, one folder per run with a
README saying the command, commit, GPU and versions and a record.json a program reads (bench/records.py, `python -m
bench records list|show|compare`); bench/tuning.md is the index of the findings.

`make bench` itself is `checks.instructor.bench`: the grader package (checks/) imports nothing from here.
"""
