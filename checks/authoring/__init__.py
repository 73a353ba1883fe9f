"""Authoring the course: notebooks and pictures generated from their sources, learner stubs from the answer keys,
known-wrong kernels."""
