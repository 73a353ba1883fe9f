"""The grading engine: registry, observations, rules, verdict (see checks/__init__.py for the map)."""
