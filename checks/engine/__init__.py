"""The grading engine, in rooms by role around the plan contract (checks/__init__.py draws the map, and says what a
grading process, a stage and a part are): `contract` (what passes between the roles), `record` (the recording
process's job), `replay` (the replay process's job), `judging` (the judge, in the grader's own process),
`grading_process` (the processes' entry points), `processes` (starting, running and sealing them) and `access` (the
interpreter's access log); `grade` runs a check's stages; the modules beside them stand below the rooms."""
