"""The judge, in the grader's own process (it never runs the learner's code): the stage that runs a stage's two grading
processes and reads their streams (`stage`), the merge of the interpreter stage's parts (`interpreter_parts`), the
configs an autotuner may choose (`configs`), the rules of the plans (`plans`, with `mma_waits`: the Gluon kernels'
waits for their asynchronous warpgroup MMA, from the text) and of the cases (`judge`, with `rules`), the timing
verdict (`timing`; its arithmetic is `checks.engine.timing`'s) and the wording of verdicts (`wording`). It imports
neither process's room."""
