"""The replay: the grader's own process performs a recorded plan with the submission's kernels, from their source.

No line of the learner's host code runs here: `kernels` builds the kernels from the source text the grader read
before the learner's code ran (checked by `checks.engine.contract.kernel_source`), and `perform` allocates, copies and
launches what the plan says, on inputs this process drew itself with values no other process has seen.
"""
