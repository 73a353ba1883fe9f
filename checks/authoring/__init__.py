"""Authoring the course: notebooks and pictures generated from their sources, known-wrong kernels."""
