"""Commands for instructors: the answer key's run, class grading, the benchmark, HTML pages."""
