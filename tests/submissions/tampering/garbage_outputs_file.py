"""Overwrites the file its returned tensors go to with something that is not a list of tensors."""

import glob
import os
import pickle
import tempfile

import torch

# the check's folder is on no command line: look for the newest events file of a check under the temporary folder
EVENTS = max(
    glob.glob(os.path.join(os.path.dirname(tempfile.gettempdir()), "checks-*", "**", "events-*.jsonl"), recursive=True),
    key=os.path.getmtime,
)


def vector_add(x, y):
    out = x.clone()
    folder = os.path.dirname(EVENTS)

    class Loud:
        def __reduce__(self):
            return (print, ("this must never run in the grader",))

    import threading

    def spoil():
        for index in range(5):
            path = os.path.join(folder, f"case_{index}.pt")
            with open(path, "wb") as f:
                pickle.dump(Loud(), f)

    threading.Timer(0.0, spoil).start()
    return torch.add(out, y)
