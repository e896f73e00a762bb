"""A seccomp-BPF deny-list for the bubblewrap backend, assembled here (no libseccomp needed).

Denied with EPERM: debugging other processes, mounting, new namespaces, kernel modules and
keyrings, BPF and perf, io_uring, clock and host settings, handle-based opens; ``socket`` for any
family but AF_UNIX; ``clone`` with namespace flags; TIOCSTI. ``clone3`` answers ENOSYS (its flags
sit in memory a filter cannot read), so the C library falls back to ``clone``. Other
architectures and the x32 ABI are killed. gVisor needs none of this: its own kernel is the filter.
"""

from __future__ import annotations

import errno
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
X32_BIT = 0x40000000
LD_ABS_W = 0x20
JEQ_K = 0x15
JGE_K = 0x35
JSET_K = 0x45
RET_K = 0x06
NR_OFFSET, ARCH_OFFSET = 0, 4
AF_UNIX = 1
TIOCSTI = 0x5412
CLONE_NEW_FLAGS = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET

# x86_64 system call numbers (asm/unistd_64.h).
DENIED: dict[str, int] = {
    "ptrace": 101,
    "syslog": 103,
    "uselib": 134,
    "personality": 135,
    "vhangup": 153,
    "pivot_root": 155,
    "_sysctl": 156,
    "adjtimex": 159,
    "chroot": 161,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "sethostname": 170,
    "setdomainname": 171,
    "iopl": 172,
    "ioperm": 173,
    "create_module": 174,
    "init_module": 175,
    "delete_module": 176,
    "quotactl": 179,
    "lookup_dcookie": 212,
    "clock_settime": 227,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
}
NR_SOCKET, NR_CLONE, NR_IOCTL, NR_CLONE3 = 41, 56, 16, 435


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _arg(i: int) -> int:
    return 16 + 8 * i  # low 32 bits of args[i] in struct seccomp_data (little-endian)


def supported() -> bool:
    return platform.machine() == "x86_64"


def program() -> bytes:
    """The filter as bwrap's ``--seccomp FD`` reads it: an array of ``struct sock_filter``."""
    eperm = RET_ERRNO | errno.EPERM
    out = [
        _ins(LD_ABS_W, ARCH_OFFSET),
        _ins(JEQ_K, AUDIT_ARCH_X86_64, jt=1),
        _ins(RET_K, RET_KILL_PROCESS),
        _ins(LD_ABS_W, NR_OFFSET),
        _ins(JGE_K, X32_BIT, jf=1),
        _ins(RET_K, RET_KILL_PROCESS),
    ]
    for nr in DENIED.values():
        out += [_ins(JEQ_K, nr, jf=1), _ins(RET_K, eperm)]
    out += [_ins(JEQ_K, NR_CLONE3, jf=1), _ins(RET_K, RET_ERRNO | errno.ENOSYS)]
    # Each block: not this call → skip its four instructions; else decide and return.
    out += [
        _ins(JEQ_K, NR_SOCKET, jf=4),
        _ins(LD_ABS_W, _arg(0)),
        _ins(JEQ_K, AF_UNIX, jt=1),
        _ins(RET_K, eperm),
        _ins(RET_K, RET_ALLOW),
    ]
    out += [
        _ins(JEQ_K, NR_CLONE, jf=4),
        _ins(LD_ABS_W, _arg(0)),
        _ins(JSET_K, CLONE_NEW_FLAGS, jf=1),
        _ins(RET_K, eperm),
        _ins(RET_K, RET_ALLOW),
    ]
    out += [
        _ins(JEQ_K, NR_IOCTL, jf=4),
        _ins(LD_ABS_W, _arg(1)),
        _ins(JEQ_K, TIOCSTI, jf=1),
        _ins(RET_K, eperm),
        _ins(RET_K, RET_ALLOW),
    ]
    out.append(_ins(RET_K, RET_ALLOW))
    return b"".join(out)
