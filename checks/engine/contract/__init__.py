"""The plan contract: what passes between the roles (the plan, the kernel source and its language, the job, the events
on the wire and their one writer, `protocol.Events`, the observations, the fork server's messages). It imports no
room."""
