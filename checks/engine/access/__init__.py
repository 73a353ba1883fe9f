"""Every load and store a kernel makes (in Triton's interpreter): the patches that see them, the recorder that
tallies them by region, the log the grading process writes, reading it, the memory-traffic report, and the
recording of an answer key's log."""
