"""Grading processes: start them (`spawn`), start them ahead of their check (`prestart`), and run one to its end
under a time limit, reading its checked event stream (`run`)."""
