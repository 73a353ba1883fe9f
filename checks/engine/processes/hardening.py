"""Refuse, in the grading process, what a submission needs to forge its report: an audit hook (PEP 578).

`harden()` runs in the grading process after its first event and before the learner's code is imported.
The hook it adds can never be removed, and sees every audited event of every thread. It refuses:

    process creation      os.fork, os.forkpty, os.posix_spawn, os.spawn*, os.exec*, os.system, subprocess,
                          os.kill/killpg (signalling the grader)
    introspection         gc.get_objects/get_referrers/get_referents, sys._getframe, sys._current_frames,
                          a traceback's, generator's or coroutine's frame (the ways to reach a frame, from
                          which f_back walks into the grader's), sys.settrace/setprofile, new audit hooks,
                          building code objects (code.__new__, code.replace)
    ctypes                every ctypes event (raw memory, foreign calls)
    disguise              compiling code under the file name of a library or of the grader (so that its
                          frames would pass for theirs), unless it is that file's own text (an import)
    the grader's files    opening, removing, renaming... anything under the check's folder; changing the
                          grader's own package
    its own process       opening /proc/self/... (its memory, where the token is; its open files, the
                          events file among them), by any of its names (/proc/PID, /proc/thread-self, /dev/fd)

when the code that asked is the learner's. Who asks is the innermost Python frame outside the standard
library: a frame of an installed package (Triton's compiler and interpreter, torch, numpy) or of the grader
may do all of this; any other frame (the learner's files, code they exec or compile) may not. A frame taken
by the standard library itself is allowed too, unless the function that took it hands it to its caller
(inspect.currentframe/stack/trace, traceback.walk_stack/walk_tb): namedtuple, typing, enum, logging and
traceback printing take one only to name a module or a caller.

Two processes add more. The recording process is sealed (`writable`): it writes only inside its own scratch folder
and starts no process at all, whichever code asks, a library's included (it compiles and runs nothing). In the replay
(`kernel_files`) the learner's code is the checked kernels alone: only their frames count as the learner's, and they
may also write no file and exec, compile or import nothing.

A refusal writes a `refused` event (with the token, through the writer the protocol bound for it, `Events.refusals`)
and ends the grading process at once, so nothing the learner's code does afterwards (catching the exception, patching
this module) counts: the grader marks the report as tampered with, with the reason.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
import threading
from collections.abc import Callable
from pathlib import Path

import checks

REFUSED_EXIT = 86  # the grading process's exit code after a refusal (the event says why)

PROCESS = {
    "os.fork": "os.fork",
    "os.forkpty": "os.forkpty",
    "os.posix_spawn": "os.posix_spawn",
    "os.spawn": "os.spawn*",
    "os.exec": "os.exec*",
    "os.system": "os.system",
    "subprocess.Popen": "subprocess",
    "os.kill": "os.kill",
    "os.killpg": "os.killpg",
    "pty.spawn": "pty.spawn",
}
INTROSPECTION = {
    "gc.get_objects": "gc.get_objects",
    "gc.get_referrers": "gc.get_referrers",
    "gc.get_referents": "gc.get_referents",
    "sys._getframe": "sys._getframe (a frame, from which f_back walks into the grader)",
    "sys._current_frames": "sys._current_frames",
    "sys.settrace": "sys.settrace",
    "sys.setprofile": "sys.setprofile",
    "sys._setprofileallthreads": "sys.setprofile",
    "sys._settraceallthreads": "sys.settrace",
    "sys.addaudithook": "sys.addaudithook",
    "code.__new__": "building a code object",
}
FRAME_ATTRIBUTES = {"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"}
PATH_EVENTS = {
    "open", "os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod", "os.chown", "os.link",
    "os.symlink", "os.utime", "os.mkdir", "shutil.rmtree", "shutil.move", "shutil.copyfile",
}  # fmt: skip
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
# standard-library functions that hand frames to their caller; a frame the standard library takes and passes
# only through these reaches whoever called them; any other function keeps it (to name a caller or a module:
# collections.namedtuple, typing, enum, logging's findCaller, warnings, traceback's printing)
_HANDING_ON = {
    "currentframe", "stack", "trace", "getouterframes", "getinnerframes", "walk_stack", "walk_tb", "<lambda>",
    "_getframe", "getframeinfo",
}  # fmt: skip

CTYPES = {
    "ctypes.addressof", "ctypes.call_function", "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.create_string_buffer",
    "ctypes.create_unicode_buffer", "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.get_errno",
    "ctypes.get_last_error", "ctypes.seh_exception", "ctypes.set_errno", "ctypes.set_last_error",
    "ctypes.string_at", "ctypes.wstring_at", "ctypes.PyObj_FromPtr",
}  # fmt: skip
WATCHED = frozenset(
    {*PATH_EVENTS, *PROCESS, *INTROSPECTION, *CTYPES, "object.__getattr__", "compile"}
)  # every other event passes at the cost of one set lookup

STDLIB, LIBRARY, LEARNER = 0, 1, 2
_THIS_FILE = __file__


def _prefixes(paths: list[str]) -> tuple[str, ...]:
    found = set()
    for path in paths:
        if path:
            found.add(path.rstrip(os.sep) + os.sep)
            found.add(os.path.realpath(path).rstrip(os.sep) + os.sep)
    return tuple(sorted(found))


class Guard:
    """The hook's state: what counts as library code and which files are the grader's."""

    def __init__(
        self,
        protected: list[Path],
        refuse: Callable[[str], None],
        read_only: list[Path],
        own: list[str],
        writable: list[Path] | None = None,
        kernel_files: list[str] | None = None,
    ) -> None:
        paths = sysconfig.get_paths()
        self.stdlib = _prefixes([paths["stdlib"], paths["platstdlib"]])
        libraries = [paths["purelib"], paths["platlib"], *site.getsitepackages(), site.getusersitepackages()]
        # where the packages really are: a distribution's Python may keep them in a folder sysconfig does not name
        # (Debian's dist-packages), or on a path of PYTHONPATH
        libraries += [p for p in sys.path if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages")]
        loaded = (sys.modules.get(name) for name in ("torch", "triton", "numpy"))  # imported before the hook
        libraries += [str(Path(m.__file__).parent.parent) for m in loaded if m is not None and m.__file__]
        self.libraries = _prefixes([*libraries, str(Path(checks.__file__).parent)])
        self.protected = _prefixes([str(p) for p in protected])
        self.read_only = _prefixes([str(p) for p in read_only])
        self.own = {os.path.realpath(p) for p in own}
        self.own_process = _prefixes(["/proc/self", "/proc/thread-self", f"/proc/{os.getpid()}", "/dev/fd"])
        # sealed (the recording process): writes only inside these folders, and no process started, whoever asks
        self.sealed = writable is not None
        self.writable = _prefixes([str(p) for p in writable or []])
        # the replay: its only learner code is the kernels, compiled under these names (every other frame is the
        # grader's or a library's, the launchers Triton generates included); they write no file, and exec, compile
        # and import nothing
        self.kernel_files = set(kernel_files) if kernel_files is not None else None
        self.kernels_only = kernel_files is not None
        self.refuse = refuse
        self.kinds: dict[str, int] = {}
        self.local = threading.local()  # `busy` while the hook itself looks at frames (which raises events)

    def kind(self, filename: str) -> int:
        found = self.kinds.get(filename)
        if found is None:
            if filename.startswith(self.libraries) or os.path.realpath(filename).startswith(self.libraries):
                found = LIBRARY  # first: a virtual environment's packages may lie inside the standard library's folder
            elif filename.startswith("<frozen ") or filename.startswith(self.stdlib):
                found = STDLIB
            elif self.kernel_files is not None and filename not in self.kernel_files:
                found = LIBRARY  # in the replay, code Triton generates (its launchers, under <string>)
            else:
                found = LEARNER
            self.kinds[filename] = found
        return found

    def learner_asks(self, naming_allowed: bool = False) -> bool:
        """Whether the innermost frame outside the standard library is the learner's (no such frame: yes)."""
        if getattr(self.local, "busy", False):
            return False  # an event the hook itself raised
        self.local.busy = True
        try:
            return self._learner_asks(naming_allowed)
        finally:
            self.local.busy = False

    def _learner_asks(self, naming_allowed: bool) -> bool:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename == _THIS_FILE:
            frame = frame.f_back  # past the hook: the code that raised the event
        if frame is None:  # no Python code asked: the interpreter itself, printing a traceback as the process ends
            self.local.asking = ""
            return False
        if naming_allowed:  # a frame taken by the standard library: does one of its functions keep it?
            inner = frame
            while inner is not None and self.kind(inner.f_code.co_filename) == STDLIB:
                if inner.f_code.co_name not in _HANDING_ON:
                    return False  # taken to name a caller or a module, and kept there
                inner = inner.f_back
        while frame is not None:
            kind = self.kind(frame.f_code.co_filename)
            if kind == LIBRARY:
                return False
            if kind == LEARNER:
                where = os.path.basename(frame.f_code.co_filename)  # as the learner names the file
                self.local.asking = f"{where}, line {frame.f_lineno}"  # named in the refusal
                return True
            frame = frame.f_back
        self.local.asking = ""
        return True

    def name_learner_line(self) -> None:
        """For a refusal whoever asked: name the innermost line of the learner's code on the stack, if any."""
        if getattr(self.local, "busy", False):
            return
        self.local.busy = True
        try:
            frame, self.local.asking = sys._getframe(1), ""
            while frame is not None:
                if self.kind(frame.f_code.co_filename) == LEARNER and frame.f_code.co_filename != _THIS_FILE:
                    self.local.asking = f"{os.path.basename(frame.f_code.co_filename)}, line {frame.f_lineno}"
                    return
                frame = frame.f_back
        finally:
            self.local.busy = False

    def refuse_asked(self, reason: str) -> None:
        """Refuse, naming the line of the code that asked (the innermost frame learner_asks found)."""
        where = getattr(self.local, "asking", "")
        self.refuse(f"{reason}, at {where}" if where else reason)

    def own_process_path(self, full: str, real: str) -> bool:
        """Whether a path (absolute, and with its links resolved) names something of this process under /proc."""
        return full.startswith(self.own_process) or real.startswith(self.own_process)

    def writable_path(self, full: str, real: str) -> bool:
        """Whether a sealed process may write here: inside its own folders (its links resolved), or /dev/null."""
        return real == os.devnull or (full.startswith(self.writable) and real.startswith(self.writable))

    def protected_path(self, full: str, real: str, writes: bool) -> bool:
        if self.writable_path(full, real):
            return False  # the process's own folder, inside the check's
        prefixes = self.protected + self.read_only if writes else self.protected
        if not writes and real in self.own:
            return False  # the learner may read its own files
        return full.startswith(prefixes) or real.startswith(prefixes)

    def __call__(self, event: str, args: tuple) -> None:
        if event in PATH_EVENTS:
            if event == "open":
                mode, flags = (args[1], args[2]) if len(args) > 2 else ("r", 0)
                writes = bool(set(str(mode or "")) & set("wax+")) or bool((flags or 0) & _WRITE_FLAGS)
                paths = args[:1]
            else:
                writes, paths = True, args[:2]
            named = [n for n in map(_full_and_real, paths) if n is not None]  # each realpath once: a hot path
            if self.sealed and writes and any(not self.writable_path(full, real) for full, real in named):
                self.name_learner_line()
                name = os.path.basename(os.fsdecode(paths[0]))  # the same in every folder a check runs in
                self.refuse_asked(f"writing outside the grading process's own folder ({name})")
            if writes and self.kernels_only and self.learner_asks():
                self.refuse_asked(f"writing a file ({os.fsdecode(paths[0])}) from a kernel")
            if any(self.protected_path(full, real, writes) for full, real in named) and self.learner_asks():
                name = os.path.basename(os.fsdecode(paths[0]))  # the same in every folder a check runs in
                self.refuse_asked(f"opening or changing the grader's file {name}")
            if any(self.own_process_path(full, real) for full, real in named) and self.learner_asks():
                name = os.path.basename(os.fsdecode(paths[0]))
                self.refuse_asked(f"opening the grading process's own memory or open files (/proc/self/.../{name})")
            return
        what = PROCESS.get(event)
        if what is not None:
            if self.sealed:  # the recording process compiles and runs nothing: it starts no process at all
                self.name_learner_line()
                self.refuse_asked(f"starting or signalling a process ({what})")
            elif self.learner_asks():
                self.refuse_asked(f"starting or signalling a process ({what})")
            return
        if event == "object.__getattr__":
            if len(args) > 1 and args[1] in FRAME_ATTRIBUTES and self.learner_asks(naming_allowed=True):
                self.refuse_asked(f"reaching a frame ({args[1]}), from which it could walk into the grader")
            return
        what = INTROSPECTION.get(event)
        if what is not None:
            if self.learner_asks(naming_allowed=event == "sys._getframe"):
                self.refuse_asked(f"looking into the grading process ({what})")
            return
        if event in ("exec", "import") or (event == "compile" and self.kernels_only):
            if self.kernels_only and self.learner_asks():
                self.refuse_asked(f"running Python a kernel cannot hold ({event})")
            if event != "compile":
                return
        if event == "compile":
            name = args[1] if len(args) > 1 else None
            if (
                isinstance(name, str)
                and self.kind(name) == LIBRARY
                and not _is_source_of(args[0], name)
                and (self.learner_asks())
            ):
                self.refuse_asked(f"compiling code under the name of a library's file ({name})")
            return
        if event in CTYPES and self.learner_asks():
            self.refuse_asked(f"using ctypes ({event})")


def _full_and_real(path: object) -> tuple[str, str] | None:
    """A path an event names, absolute as given and with its links resolved; None for a descriptor or no path."""
    if isinstance(path, int) or path is None:
        return None
    try:
        full = os.path.abspath(os.fsdecode(path))
    except TypeError:
        return None
    return full, os.path.realpath(full)


def _is_source_of(source: object, filename: str) -> bool:
    """Whether `source` is the file's own text (the import system compiling it), not code posing as it."""
    if not isinstance(source, (bytes, str)):
        return False
    try:
        with open(filename, "rb") as f:  # an open by the hook itself: `busy` is not needed, the path is a library's
            text = f.read()
    except OSError:
        return False
    return text == (source.encode() if isinstance(source, str) else source)


def harden(
    protected: list[Path],
    write: Callable[[str], None],
    read_only: list[Path] | None = None,
    own: list[str] | None = None,
    exit_now: Callable[[int], None] = os._exit,
    writable: list[Path] | None = None,
    kernel_files: list[str] | None = None,
) -> Guard:
    """Add the audit hook. `protected`: folders the learner may not open; `read_only`: folders the learner may
    read but not change; `own`: the learner's files, which it may read. `writable`, for a sealed process (the
    recording one): the only folders it may write in, whichever code asks, and it starts no process at all.
    `kernel_files` (the replay): the learner's code is the kernels alone, compiled under these file names, which write
    no file and exec, compile and import nothing; every other frame counts as a library's.
    `write(reason)` reports a refusal (an event); then the process ends with REFUSED_EXIT.

    Everything the refusal needs is bound here, before the learner's code runs, so that patching a module
    afterwards changes nothing.
    """
    done: list[str] = []

    def refuse(reason: str) -> None:
        if not done:
            done.append(reason)
            try:
                write(reason)
            finally:
                exit_now(REFUSED_EXIT)
        raise PermissionError(f"The grader refuses this: {reason}.")

    guard = Guard(protected, refuse, read_only or [], own or [], writable, kernel_files)
    sys.dont_write_bytecode = True  # the import system writes no bytecode beside the grader's modules now
    watched, check = (WATCHED | {"exec", "import"}) if kernel_files is not None else WATCHED, guard.__call__

    def hook(event: str, args: tuple) -> None:
        if event in watched:
            check(event, args)

    sys.addaudithook(hook)
    return guard
