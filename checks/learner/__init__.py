"""Commands for learners: hints, progress, the doctor, pictures and maps, the notebook helpers."""
