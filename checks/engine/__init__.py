"""The grading engine: registry, observations, rules, verdict (see checks/__init__.py for the map, and for the
words it uses: grading process, stage, part)."""
