"""The plan contract: what passes between the roles (the plan, the kernel source and its language, the job and the
events on the wire, the observations)."""
