"""No process from the recording process, at the kernel's level: a seccomp filter (Linux, x86-64 and arm64).

The audit hook (`checks.engine.processes.hardening`) refuses the Python calls that start a process, but a few paths
start one without an audit event (`_posixsubprocess.fork_exec`, which `multiprocessing`'s spawn uses). This filter
makes the system calls themselves fail with EPERM, whoever makes them: fork, vfork, execve, execveat and a clone that
is not a thread's. A thread's clone goes through (clone3, whose flags a filter cannot read, fails with ENOSYS, and
the C library then creates the thread with clone). It cannot be removed, and every thread of the process gets it
(TSYNC). Where it cannot be installed (another system or processor), nothing changes: the audit hook still refuses.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
CLONE_THREAD = 0x00010000
X32_BIT = 0x40000000

# (audit arch, seccomp syscall number, {call: number}) by machine; fork and vfork do not exist on arm64
SYSTEMS = {
    "x86_64": (0xC000003E, 317, {"fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "clone": 56, "clone3": 435}),
    "aarch64": (0xC00000B7, 277, {"execve": 221, "execveat": 281, "clone": 220, "clone3": 435}),
}

# classic BPF: load a word of seccomp_data, jump if equal / if bits set, return
LD_W_ABS, JEQ_K, JSET_K, JGE_K, RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jump if true, jump if false, value) instructions, for `machine`."""
    arch, _, calls = SYSTEMS[machine]
    denied = [calls[name] for name in ("fork", "vfork", "execve", "execveat") if name in calls]
    allow, deny, enosys = SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | errno.EPERM, SECCOMP_RET_ERRNO | errno.ENOSYS
    body: list[tuple[int, int, int, int]] = [(LD_W_ABS, 0, 0, OFFSET_NR)]
    if machine == "x86_64":
        body.append((JGE_K, 0, 0, X32_BIT))  # the x32 calls: denied below (jump filled in)
    body += [(JEQ_K, 0, 0, nr) for nr in denied]  # denied (jumps filled in)
    body += [(JEQ_K, 0, 0, calls["clone3"]), (JEQ_K, 0, 0, calls["clone"])]
    body += [(LD_W_ABS, 0, 0, OFFSET_ARG0), (JSET_K, 0, 0, CLONE_THREAD)]
    # the returns, after the body: allow, deny, enosys
    n = len(body)
    at_allow, at_deny, at_enosys = n, n + 1, n + 2
    resolved: list[tuple[int, int, int, int]] = []
    for i, (code, _, _, k) in enumerate(body):
        to = lambda target, i=i: target - i - 1  # a jump is relative to the next instruction
        if code == JGE_K:
            resolved.append((code, to(at_deny), 0, k))
        elif code == JEQ_K and k == calls["clone3"]:
            resolved.append((code, to(at_enosys), 0, k))
        elif code == JEQ_K and k == calls["clone"]:
            resolved.append((code, 0, to(at_allow), k))  # a clone: look at its flags; anything else: allow
        elif code == JEQ_K:
            resolved.append((code, to(at_deny), 0, k))
        elif code == JSET_K:
            resolved.append((code, to(at_allow), to(at_deny), k))  # a thread's clone: allow; a process: deny
        else:
            resolved.append((code, 0, 0, k))
    head = [(LD_W_ABS, 0, 0, OFFSET_ARCH), (JEQ_K, 1, 0, arch), (RET_K, 0, 0, deny)]  # another ABI: nothing
    return [*head, *resolved, (RET_K, 0, 0, allow), (RET_K, 0, 0, deny), (RET_K, 0, 0, enosys)]


def forbid_processes() -> bool:
    """Install the filter in this process (all its threads); True when it is in place."""
    machine = platform.machine()
    if not sys.platform.startswith("linux") or machine not in SYSTEMS:
        return False
    _, seccomp_nr, _ = SYSTEMS[machine]
    code = b"".join(struct.pack("HBBI", *instruction) for instruction in program(machine))
    buffer = ctypes.create_string_buffer(code)

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Program(len(code) // 8, ctypes.addressof(buffer))
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        done = libc.syscall(seccomp_nr, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(prog))
    except (OSError, AttributeError):
        return False
    return done == 0
