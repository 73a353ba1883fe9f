"""The recording room: what runs beside the learner's host code in the recording process (the plan recorder and the
hardening that seals the process)."""
