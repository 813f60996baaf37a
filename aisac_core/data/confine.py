"""Kernel-enforced confinement a session worker applies to itself before it reads any request (standard library
only: the worker imports this file as a sibling module, under ``python -I``, also inside bubblewrap).

Two Linux mechanisms, each applied when the kernel offers it, in every isolation mode (under bubblewrap they are a
second wall; without bubblewrap they are the wall):

- **seccomp-BPF** (``seccomp(2)``, ``Documentation/userspace-api/seccomp_filter.rst``): a filter that makes the
  system calls creating processes (``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``, ``execve``,
  ``execveat``), sockets, namespaces, mounts, ``ptrace`` and cross-process memory access fail with ``EPERM``;
  ``clone3`` fails with ``ENOSYS`` so glibc creates threads with ``clone`` (whose flags a filter can read).
  Calls of another ABI (x32, i386 on x86-64) fail too. Unlike ``RLIMIT_NPROC`` this also binds a worker whose
  user is root, and unlike a PEP 578 audit hook it also binds C code (``_posixsubprocess.fork_exec``).
- **Landlock** (``landlock(7)``, ABI 1-7): the worker may read (and map, execute) only the Python installation,
  the system libraries and a few named files, and may write only inside its session directory; from ABI 6 on it
  may not signal processes or reach abstract UNIX sockets outside its domain. This holds for C extensions
  (``pyarrow.fs``) as for Python code, without privileges.

Both need ``PR_SET_NO_NEW_PRIVS`` (``prctl(2)``). The structures and constants come from the kernel's UAPI
headers ``linux/seccomp.h``, ``linux/filter.h``, ``linux/landlock.h`` and the per-architecture syscall tables.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

# -- seccomp ------------------------------------------------------------------------------------------------
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
#: system calls refused with EPERM, per architecture (arch/x86/entry/syscalls/syscall_64.tbl,
#: include/uapi/asm-generic/unistd.h)
_DENY = {
    "x86_64": {
        "fork": 57,
        "vfork": 58,
        "execve": 59,
        "execveat": 322,
        "socket": 41,
        "socketpair": 53,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "unshare": 272,
        "setns": 308,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "bpf": 321,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "kexec_load": 246,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "pidfd_getfd": 438,
        "pidfd_send_signal": 424,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsmount": 432,
        "mount_setattr": 442,
        "io_uring_setup": 425,
    },
    "aarch64": {
        "execve": 221,
        "execveat": 281,
        "socket": 198,
        "socketpair": 199,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "unshare": 97,
        "setns": 268,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "bpf": 280,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "kexec_load": 104,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "pidfd_getfd": 438,
        "pidfd_send_signal": 424,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsmount": 432,
        "mount_setattr": 442,
        "io_uring_setup": 425,
    },
}
_CLONE = {"x86_64": 56, "aarch64": 220}
_CLONE3 = 435
_CLONE_THREAD = 0x00010000
_EPERM, _ENOSYS = 1, 38
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
# BPF opcodes (linux/filter.h): LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, JMP|JSET|K, RET|K
_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The classic-BPF seccomp filter described in the module docstring for ``machine`` (default: this one's),
    as the bytes of a ``struct sock_filter`` array; None for an architecture without a table here."""
    machine = machine or platform.machine()
    if machine not in _AUDIT_ARCH:
        return None
    deny = sorted(_DENY[machine].values())
    prog = [
        _insn(_LD, 4),  # seccomp_data.arch
        _insn(_JEQ, _AUDIT_ARCH[machine], 1, 0),
        _insn(_RET, _RET_ERRNO | _EPERM),
        _insn(_LD, 0),
    ]  # seccomp_data.nr
    if machine == "x86_64":  # the x32 ABI sets bit 30 of the number
        prog += [_insn(_JGE, 0x40000000, 0, 1), _insn(_RET, _RET_ERRNO | _EPERM)]
    for nr in deny:
        prog += [_insn(_JEQ, nr, 0, 1), _insn(_RET, _RET_ERRNO | _EPERM)]
    prog += [
        _insn(_JEQ, _CLONE3, 0, 1),
        _insn(_RET, _RET_ERRNO | _ENOSYS),
        _insn(_JEQ, _CLONE[machine], 0, 3),
        _insn(_LD, 16),  # low 32 bits of args[0] (little endian): the clone flags
        _insn(_JSET, _CLONE_THREAD, 1, 0),
        _insn(_RET, _RET_ERRNO | _EPERM),
        _insn(_RET, _RET_ALLOW),
    ]
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def apply_seccomp() -> str | None:
    """Install :func:`seccomp_program` on this process (and its future threads). Returns None on success, else
    why it could not (unknown architecture, or the kernel's error)."""
    prog = seccomp_program()
    if prog is None:
        return f"no seccomp filter for architecture {platform.machine()}"
    libc = _libc()
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}"
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return f"seccomp filter refused: {os.strerror(ctypes.get_errno())}"
    return None


# -- Landlock -----------------------------------------------------------------------------------------------
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # same numbers on every architecture
_CREATE_VERSION = 1
_RULE_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
#: file-system rights each ABI version handles (landlock(7) "Filesystem actions")
_FS_BITS = {1: 13, 2: 14, 3: 15, 4: 15, 5: 16, 6: 16, 7: 16}
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | (1 << 14) | (1 << 15)  # rights that apply to a non-directory


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The Landlock ABI version the kernel offers (0: none, e.g. not built in or not enabled at boot)."""
    try:
        r = _libc().syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(r), 0)


def apply_landlock(read: list[str], write: list[str]) -> tuple[int, str | None]:
    """Restrict this process (and its future threads) to reading beneath the paths of ``read`` and reading and
    writing beneath those of ``write`` (missing paths are skipped; a file path grants that file only).

    Returns ``(abi, None)`` on success, else ``(abi, why not)``; ``abi`` 0 means the kernel has no Landlock."""
    abi = landlock_abi()
    if abi <= 0:
        return 0, "the kernel offers no Landlock"
    handled = (1 << _FS_BITS.get(abi, 16)) - 1
    attr = _RulesetAttr(handled, 0, (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 8
    libc = _libc()
    rfd = libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if rfd < 0:
        return abi, f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}"
    try:
        for paths, rights in ((read, _EXECUTE | _READ_FILE | _READ_DIR), (write, handled)):
            for p in paths:
                try:
                    fd = os.open(p, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    allowed = rights if os.path.isdir(p) else rights & _FILE_RIGHTS
                    rule = _PathBeneath(allowed & handled, fd)
                    if (
                        libc.syscall(
                            _SYS_ADD_RULE,
                            ctypes.c_int(rfd),
                            ctypes.c_int(_RULE_PATH_BENEATH),
                            ctypes.byref(rule),
                            ctypes.c_uint32(0),
                        )
                        != 0
                    ):
                        return abi, f"landlock_add_rule({p}) failed: {os.strerror(ctypes.get_errno())}"
                finally:
                    os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return abi, f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}"
        if libc.syscall(_SYS_RESTRICT, ctypes.c_int(rfd), ctypes.c_uint32(0)) != 0:
            return abi, f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(rfd)
    return abi, None
