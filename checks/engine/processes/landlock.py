"""The kernel's seal on a process that runs the learner's code: Landlock (Linux 5.13 and later) and a seccomp filter.

The audit hook (`checks.engine.processes.hardening`) sees only what Python audits: a writer in C (torch.from_file,
torch.save's archive writer, sqlite3) opens its files unseen. `seal(writable)` asks the kernel instead, for this
thread and every thread and process it starts afterwards (so it runs before the learner's code and before any thread
of its own): files may be read anywhere but written, created, removed, renamed or truncated only beneath the
`writable` folders (and /dev/null; on a GPU machine, the NVIDIA devices CUDA opens); no TCP connection or listener
(Landlock ABI 4), no signal to a process outside the seal and no connection to an abstract unix socket outside it
(ABI 6); and no socket but a unix one (`forbid_network`, a seccomp filter, since Landlock's network rules cover TCP
alone). A file opened before the seal (the events file, the output log) stays writable: Landlock checks a file when
it is opened.

Landlock is reached through its three system calls with ctypes: the Python bindings on PyPI are development or beta
releases, and a GPU machine without network could not install one. Where the kernel has no Landlock (gVisor's,
older kernels), `unsealed_reason()` says so in one sentence and the grading says it was not sealed.
"""

from __future__ import annotations

import ctypes
import glob
import os
import platform
import struct
import sys
import tempfile
from pathlib import Path

from checks.engine.processes.no_processes import (
    JEQ_K,
    LD_W_ABS,
    OFFSET_ARCH,
    OFFSET_NR,
    PR_SET_NO_NEW_PRIVS,
    RET_K,
    SECCOMP_FILTER_FLAG_TSYNC,
    SECCOMP_RET_ALLOW,
    SECCOMP_RET_ERRNO,
    SECCOMP_SET_MODE_FILTER,
    SYSTEMS,
)

# the system calls (the same number on every architecture) and their flags, as linux/landlock.h names them
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

# filesystem rights, each with the first ABI that knows it
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FS_RIGHTS = {1: (1 << 13) - 1, 2: REFER, 3: TRUNCATE, 5: IOCTL_DEV}  # ABI -> rights it adds
NET_TCP = (1 << 0) | (1 << 1)  # bind and connect, ABI 4
SCOPES = (1 << 0) | (1 << 1)  # abstract unix sockets and signals, ABI 6
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # those a rule on a file (not a folder) may hold
READING = EXECUTE | READ_FILE | READ_DIR

AF_UNIX = 1
SOCKET_CALL = {"x86_64": 41, "aarch64": 198}
DEVICES = ("/dev/null", "/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*")  # written by any process, or CUDA's


class SealError(RuntimeError):
    """The kernel offers Landlock but the seal could not be put in place: nothing of the learner's may run."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_abi: list[int] = []


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi() -> int:
    """The Landlock ABI this kernel offers (0: none), asked with landlock_create_ruleset(NULL, 0, VERSION)."""
    if not _abi:
        found = 0
        if sys.platform.startswith("linux"):
            try:
                found = max(0, int(_libc().syscall(CREATE_RULESET, None, 0, CREATE_RULESET_VERSION)))
            except (OSError, AttributeError):
                found = 0
        _abi.append(found)
    return _abi[0]


def unsealed_reason() -> str:
    """One sentence on why the kernel does not seal the recording process here, or "" when it does."""
    if not sys.platform.startswith("linux"):
        return f"This machine runs {sys.platform}, not Linux, whose Landlock seals the recording process."
    if abi() == 0:
        return (
            f"This machine's kernel ({platform.release()}) offers no Landlock, so the process that ran your code was "
            "sealed only by the grader's audit hook, not by the kernel."
        )
    return ""


def _handled(version: int) -> tuple[int, int, int]:
    fs = sum(rights for since, rights in FS_RIGHTS.items() if version >= since)
    return fs, NET_TCP if version >= 4 else 0, SCOPES if version >= 6 else 0


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if os.path.isfile(path) or not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        if libc.syscall(ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise SealError(f"landlock_add_rule on {path}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def seal(writable: list[Path]) -> int:
    """Confine this thread and all it starts from now on: read anywhere, write only beneath `writable` (and the
    devices of DEVICES), no network, no signal out. The ABI used (0: no Landlock here, nothing done but the network
    filter); SealError when the kernel has Landlock and the seal failed. The temporary folder of Python's `tempfile`
    (and of what this process starts, through TMPDIR) becomes the first writable folder: a library that asks for one
    (torch's caches, for one) then finds a folder it may write in instead of failing."""
    forbid_network()
    version = abi()
    if version == 0:
        return 0
    if writable:
        tempfile.tempdir = os.environ["TMPDIR"] = str(writable[0])
    libc = _libc()
    fs, net, scoped = _handled(version)
    attr = _RulesetAttr(fs, net, scoped)
    ruleset = int(libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0))
    if ruleset < 0:
        raise SealError(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        _allow(libc, ruleset, "/", READING)
        for folder in writable:
            _allow(libc, ruleset, str(folder), fs)
        for pattern in DEVICES:
            for device in glob.glob(pattern):
                _allow(libc, ruleset, device, fs)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise SealError(f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
        if libc.syscall(RESTRICT_SELF, ruleset, 0) != 0:
            raise SealError(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return version


def network_filter(machine: str) -> list[tuple[int, int, int, int]]:
    """A seccomp filter, as (code, jump if true, jump if false, value) instructions: socket() of any family but
    AF_UNIX fails with EPERM (a UDP or raw socket too, which Landlock's rules do not cover)."""
    arch, _, _ = SYSTEMS[machine]
    allow, deny = SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | 1  # EPERM
    return [
        (LD_W_ABS, 0, 0, OFFSET_ARCH),
        (JEQ_K, 1, 0, arch),
        (RET_K, 0, 0, deny),  # another ABI (x86's 32-bit calls): nothing
        (LD_W_ABS, 0, 0, OFFSET_NR),
        (JEQ_K, 0, 3, SOCKET_CALL[machine]),  # not socket(): allow
        (LD_W_ABS, 0, 0, 16),  # its first argument, the family
        (JEQ_K, 1, 0, AF_UNIX),
        (RET_K, 0, 0, deny),
        (RET_K, 0, 0, allow),
    ]


def forbid_network() -> bool:
    """Install `network_filter` in this process (all its threads); True when it is in place."""
    machine = platform.machine()
    if not sys.platform.startswith("linux") or machine not in SOCKET_CALL:
        return False
    code = b"".join(struct.pack("HBBI", *instruction) for instruction in network_filter(machine))
    buffer = ctypes.create_string_buffer(code)

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Program(len(code) // 8, ctypes.addressof(buffer))
    try:
        libc = _libc()
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        seccomp = SYSTEMS[machine][1]
        return libc.syscall(seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(prog)) == 0
    except (OSError, AttributeError):
        return False
