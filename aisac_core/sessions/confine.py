"""Kernel-enforced confinement a session worker applies to itself before it reads any request (standard library
only: the worker imports this file as a sibling module, under ``python -I``, also inside bubblewrap).

Two Linux mechanisms, each applied when the kernel offers it, in every isolation mode (under bubblewrap they are a
second wall; without bubblewrap they are the wall):

- **seccomp-BPF** (``seccomp(2)``, ``Documentation/userspace-api/seccomp_filter.rst``): a filter that makes the
  system calls creating processes (``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``, ``execve``,
  ``execveat``), sockets, namespaces, mounts, ``ptrace`` and cross-process memory access fail with ``EPERM``;
  ``clone3`` fails with ``ENOSYS`` so glibc creates threads with ``clone`` (whose flags a filter can read).
  It also refuses, outright, what a cell has no need of and what reaches past the session: changing a file's mode,
  owner or times (``chmod``/``fchmod*``/``chown*``/``utime*``), its inode flags (``ioctl`` ``FS_IOC_SETFLAGS``,
  ``FS_IOC_FSSETXATTR``, ``file_setattr``), watching files (``inotify_*``, ``fanotify_*``), memory outside the address-space limit
  (``memfd_create``, ``memfd_secret``, System V and POSIX shared memory / queues), interval timers (``alarm``,
  ``setitimer``, ``timer_create``: nothing may fire after a run), device nodes (``mknod*``), file handles,
  priorities and NUMA placement of others; and it lets ``kill``/``tgkill``/``rt_*sigqueueinfo`` reach only the
  worker's own pid and ``prlimit64``/``sched_setaffinity`` only the worker itself (pid 0 or its own pid).
  Extended attributes, every variant, fail with ``EOPNOTSUPP`` (an ACL in ``system.posix_acl_access`` changes
  effective permissions). Calls of another ABI (x32, i386 on x86-64) fail too. The audit of the whole system-call
  table behind these lists is in docs/data.md ("System calls: the audit"). Unlike ``RLIMIT_NPROC`` this also binds a worker whose
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
import errno
import os
import platform
import stat
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
        # mode, owner and times of files (the kernel's DAC would let the server's user change the store's)
        "chmod": 90,
        "fchmod": 91,
        "fchmodat": 268,
        "fchmodat2": 452,
        "chown": 92,
        "fchown": 93,
        "lchown": 94,
        "fchownat": 260,
        "utime": 132,
        "utimes": 235,
        "futimesat": 261,
        "utimensat": 280,
        # memory RLIMIT_AS does not count, and shared memory that outlives the worker
        "memfd_create": 319,
        "memfd_secret": 447,
        "shmget": 29,
        "msgget": 68,
        "semget": 64,
        "mq_open": 240,
        # timers that would fire after a run
        "alarm": 37,
        "setitimer": 38,
        "timer_create": 222,
        # other processes (by pid, by thread id, by user) and the machine
        "tkill": 200,
        "setpriority": 141,
        "ioprio_set": 251,
        "sched_setparam": 142,
        "sched_setscheduler": 144,
        "sched_setattr": 314,
        "migrate_pages": 256,
        "move_pages": 279,
        "kcmp": 312,
        "pidfd_open": 434,
        "process_madvise": 440,
        "process_mrelease": 448,
        "mknod": 133,
        "mknodat": 259,
        "name_to_handle_at": 303,
        "open_by_handle_at": 304,
        "fanotify_init": 300,
        "swapon": 167,
        "swapoff": 168,
        "reboot": 169,
        "sethostname": 170,
        "setdomainname": 171,
        "iopl": 172,
        "ioperm": 173,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "quotactl": 179,
        "acct": 163,
        "settimeofday": 164,
        "adjtimex": 159,
        "clock_settime": 227,
        "clock_adjtime": 305,
        "syslog": 103,
        "vhangup": 153,
        # mounts through the new mount API, namespaces of others (listns, Linux 6.18)
        "fsconfig": 431,
        "fspick": 433,
        "open_tree_attr": 467,
        "listns": 470,
        "quotactl_fd": 443,
        "uselib": 134,
        # watching files and folders: inotify names the entries of a folder a cell may not list
        "inotify_init": 253,
        "inotify_init1": 294,
        "inotify_add_watch": 254,
        "inotify_rm_watch": 255,
        "fanotify_mark": 301,
        # a file's flags and project attributes by path (file_setattr, Linux 6.17)
        "file_setattr": 469,
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
        "fchmod": 52,
        "fchmodat": 53,
        "fchmodat2": 452,
        "fchown": 55,
        "fchownat": 54,
        "utimensat": 88,
        "memfd_create": 279,
        "memfd_secret": 447,
        "shmget": 194,
        "msgget": 186,
        "semget": 190,
        "mq_open": 180,
        "setitimer": 103,
        "timer_create": 107,
        "tkill": 130,
        "setpriority": 140,
        "ioprio_set": 30,
        "sched_setparam": 118,
        "sched_setscheduler": 119,
        "sched_setattr": 274,
        "migrate_pages": 238,
        "move_pages": 239,
        "kcmp": 272,
        "pidfd_open": 434,
        "process_madvise": 440,
        "process_mrelease": 448,
        "mknodat": 33,
        "name_to_handle_at": 264,
        "open_by_handle_at": 265,
        "fanotify_init": 262,
        "swapon": 224,
        "swapoff": 225,
        "reboot": 142,
        "sethostname": 161,
        "setdomainname": 162,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "quotactl": 60,
        "acct": 89,
        "settimeofday": 170,
        "adjtimex": 171,
        "clock_settime": 112,
        "clock_adjtime": 266,
        "syslog": 116,
        "vhangup": 58,
        "fsconfig": 431,
        "fspick": 433,
        "open_tree_attr": 467,
        "listns": 470,
        "quotactl_fd": 443,
        "inotify_init1": 26,
        "inotify_add_watch": 27,
        "inotify_rm_watch": 28,
        "fanotify_mark": 263,
        "file_setattr": 469,
    },
}
#: extended attributes, every variant (by path, link, descriptor, and the ``*xattrat`` calls of Linux 6.13): they
#: fail with ``EOPNOTSUPP``, as on a file system without xattrs, so that libraries that copy them (``shutil.copy2``)
#: carry on. ``system.posix_acl_access`` is an ACL that changes a file's effective permissions (and its mode bits),
#: and neither the mode calls above nor Landlock cover it (through it a data dir became 0755); reading
#: is refused too (a cell has no use for another file's labels or ACLs).
_XATTR = {
    "x86_64": {
        "setxattr": 188,
        "lsetxattr": 189,
        "fsetxattr": 190,
        "getxattr": 191,
        "lgetxattr": 192,
        "fgetxattr": 193,
        "listxattr": 194,
        "llistxattr": 195,
        "flistxattr": 196,
        "removexattr": 197,
        "lremovexattr": 198,
        "fremovexattr": 199,
        "setxattrat": 463,
        "getxattrat": 464,
        "listxattrat": 465,
        "removexattrat": 466,
    },
    "aarch64": {
        "setxattr": 5,
        "lsetxattr": 6,
        "fsetxattr": 7,
        "getxattr": 8,
        "lgetxattr": 9,
        "fgetxattr": 10,
        "listxattr": 11,
        "llistxattr": 12,
        "flistxattr": 13,
        "removexattr": 14,
        "lremovexattr": 15,
        "fremovexattr": 16,
        "setxattrat": 463,
        "getxattrat": 464,
        "listxattrat": 465,
        "removexattrat": 466,
    },
}
_IOCTL = {"x86_64": 16, "aarch64": 29}
#: ``ioctl`` requests refused with EPERM (the kernel compares the request as a 32-bit number): a file's inode flags
#: (``FS_IOC_SETFLAGS``, ``chattr``: append-only, immutable, no-dump...), its extended flags and project id
#: (``FS_IOC_FSSETXATTR``), its generation (``FS_IOC_SETVERSION``), each also in its 32-bit spelling, and pushing
#: input into a terminal (``TIOCSTI``). ``linux/fs.h``, ``asm-generic/ioctls.h``.
DENIED_IOCTLS = {
    "FS_IOC_SETFLAGS": 0x40086602,
    "FS_IOC32_SETFLAGS": 0x40046602,
    "FS_IOC_FSSETXATTR": 0x401C5820,
    "FS_IOC_SETVERSION": 0x40087602,
    "FS_IOC32_SETVERSION": 0x40047602,
    "TIOCSTI": 0x5412,
}
#: system calls allowed only on the worker itself: the pid argument (args[0]) must be the worker's own pid
#: (``kill``, ``tgkill``, ``rt_sigqueueinfo``, ``rt_tgsigqueueinfo``) or also 0, "this process" (``prlimit64``,
#: ``sched_setaffinity``; glibc's ``setrlimit``/``getrlimit`` are ``prlimit64(0, ...)``)
_SELF_ONLY = {
    "x86_64": {
        "kill": (62, False),
        "tgkill": (234, False),
        "rt_sigqueueinfo": (129, False),
        "rt_tgsigqueueinfo": (297, False),
        "prlimit64": (302, True),
        "sched_setaffinity": (203, True),
    },
    "aarch64": {
        "kill": (129, False),
        "tgkill": (131, False),
        "rt_sigqueueinfo": (138, False),
        "rt_tgsigqueueinfo": (240, False),
        "prlimit64": (261, True),
        "sched_setaffinity": (122, True),
    },
}
_CLONE = {"x86_64": 56, "aarch64": 220}
_CLONE3 = 435
_CLONE_THREAD = 0x00010000
_EPERM, _ENOSYS, _EOPNOTSUPP = 1, 38, 95
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
# BPF opcodes (linux/filter.h): LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, JMP|JSET|K, RET|K
_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def seccomp_program(machine: str | None = None, pid: int | None = None) -> bytes | None:
    """The classic-BPF seccomp filter described in the module docstring for ``machine`` (default: this one's),
    as the bytes of a ``struct sock_filter`` array; None for an architecture without a table here. ``pid``: the
    one process signals and limit changes may reach (default: this process, ``os.getpid()``)."""
    machine = machine or platform.machine()
    me = os.getpid() if pid is None else pid
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
    for nr in sorted(_XATTR[machine].values()):
        prog += [_insn(_JEQ, nr, 0, 1), _insn(_RET, _RET_ERRNO | _EOPNOTSUPP)]
    # ioctl: the request is args[1]; its low 32 bits (offset 24, little endian) are what the kernel compares
    reqs = sorted(DENIED_IOCTLS.values())
    block = [_insn(_LD, 24)]
    for i, req in enumerate(reqs):
        block.append(_insn(_JEQ, req, len(reqs) - i, 0))  # to the EPERM return below
    block += [_insn(_RET, _RET_ALLOW), _insn(_RET, _RET_ERRNO | _EPERM)]
    prog += [_insn(_JEQ, _IOCTL[machine], 0, len(block)), *block]
    for nr, zero_ok in _SELF_ONLY[machine].values():
        # pid_t is 32 bits: the kernel reads only the low word of args[0] (offset 16, little endian)
        block = [_insn(_LD, 16), _insn(_JEQ, me & 0xFFFFFFFF, 1 + int(zero_ok), 0)]
        if zero_ok:
            block.append(_insn(_JEQ, 0, 1, 0))
        block += [_insn(_RET, _RET_ERRNO | _EPERM), _insn(_RET, _RET_ALLOW)]
        prog += [_insn(_JEQ, nr, 0, len(block)), *block]
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


# -- capabilities and the session file system ----------------------------------------------------------------
_CAPSET = {"x86_64": 126, "aarch64": 91}
_CAP_VERSION_3 = 0x20080522  # _LINUX_CAPABILITY_VERSION_3 (linux/capability.h)
_MS_NOSUID, _MS_NODEV = 2, 4


def drop_capabilities() -> str | None:
    """Clear this process's effective, permitted and inheritable capability sets (``capset(2)``): a worker that
    runs as root (isolation ``none``) or as root of its own user namespace (``unshare``) keeps no privilege after
    its set-up. Returns None on success, else why not."""
    nr = _CAPSET.get(platform.machine())
    if nr is None:
        return f"no capset number for architecture {platform.machine()}"
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two struct __user_cap_data_struct, all zero
    if _libc().syscall(ctypes.c_long(nr), ctypes.byref(header), ctypes.byref(data)) != 0:
        return f"capset failed: {os.strerror(ctypes.get_errno())}"
    return None


def mount_tmpfs(path: str, size_bytes: int, inodes: int) -> str | None:
    """Mount a tmpfs of at most ``size_bytes`` bytes and ``inodes`` entries on ``path`` (``mount(2)``,
    ``tmpfs(5)`` options ``size``, ``nr_inodes``, ``mode``; ``nosuid``, ``nodev``). Needs CAP_SYS_ADMIN in the
    process's user namespace and a mount namespace of its own (isolation ``unshare``). Returns None on success,
    else why not."""
    libc = _libc()
    opts = f"size={int(size_bytes)},nr_inodes={int(inodes)},mode=0700".encode()
    if libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", ctypes.c_ulong(_MS_NOSUID | _MS_NODEV), opts) != 0:
        return f"mounting the session tmpfs failed: {os.strerror(ctypes.get_errno())}"
    return None


def copy_data(src: int, dst: int) -> int:
    """Copy the regular file open as ``src`` into the empty file open (for writing) as ``dst``, hole for hole: only
    the data segments are written, found with ``lseek(SEEK_DATA)``/``lseek(SEEK_HOLE)`` (``lseek(2)``), at their
    offsets, and the size is set with ``ftruncate``; a file system without those answers is copied whole. So a
    sparse file takes on the copy the blocks it takes on the original (a file truncated to 60 MB takes none).
    Returns the bytes written. Raises OSError (ENOSPC/EFBIG when the copy does not fit)."""
    size = os.fstat(src).st_size
    written = off = 0
    while off < size:
        try:
            start = os.lseek(src, off, os.SEEK_DATA)
            end = os.lseek(src, start, os.SEEK_HOLE)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data past ``off``: the rest is a hole
                break
            if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
            start, end = off, size
        pos = start
        os.lseek(dst, pos, os.SEEK_SET)
        while pos < end:
            n = os.sendfile(dst, src, pos, min(end - pos, 1 << 24))
            if n <= 0:
                break
            pos += n
            written += n
        off = max(end, pos)
    os.ftruncate(dst, size)
    return written


def copy_tree(src: int, dst: int) -> None:
    """Copy the plain folders and regular files below directory descriptor ``src`` to ``dst`` with their times,
    never following a link and skipping every other kind of entry (a FIFO is not opened); holes stay holes
    (:func:`copy_data`) and hard links stay links (one copy, linked again by its path below ``dst``); stops quietly
    when the tmpfs is full (the quota) or below 64 levels. The worker fills its session tmpfs (:func:`mount_tmpfs`)
    with it from the folder on disk."""
    _copy_tree(src, dst, dst, 0, {}, "")


def _copy_tree(src: int, dst: int, top: int, depth: int, links: dict[int, str], rel: str) -> None:
    if depth > 64:
        return
    with os.scandir(src) as it:
        names = [e.name for e in it]
    for name in names:
        try:
            st = os.stat(name, dir_fd=src, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                os.mkdir(name, 0o700, dir_fd=dst)
                a = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=src)
                b = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dst)
                try:
                    _copy_tree(a, b, top, depth + 1, links, f"{rel}{name}/")
                    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))
                finally:
                    os.close(a)
                    os.close(b)
            elif stat.S_ISREG(st.st_mode):
                if st.st_nlink > 1 and st.st_ino in links:  # a second name of a file copied already
                    os.link(links[st.st_ino], name, src_dir_fd=top, dst_dir_fd=dst, follow_symlinks=False)
                    continue
                a = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src)
                try:
                    if not stat.S_ISREG(os.fstat(a).st_mode):
                        continue
                    b = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dst)
                    try:
                        copy_data(a, b)
                        os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))
                    finally:
                        os.close(b)
                    if st.st_nlink > 1:
                        links[st.st_ino] = rel + name
                finally:
                    os.close(a)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EFBIG):
                return
