"""The rules a graded call must satisfy, and the rulebook that lists them: pure functions from what the parent
re-derived and what the grading process observed to a problem or None."""
