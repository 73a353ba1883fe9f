"""The rules a graded call must satisfy, each a pure function from what the parent re-derived and what the grading
process observed to a problem or None, declared beside its function (`declare`); the rulebook orders them."""
