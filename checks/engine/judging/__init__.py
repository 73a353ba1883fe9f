"""The judging side, in the grader's own process (it never runs the learner's code): the stage that reads a
grading process's stream, the judge of each case, the wording of verdicts, the merge of the interpreter stage's
parts, and the arithmetic of the timing."""
