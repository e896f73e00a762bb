"""Imported by Python at start-up inside the sandbox (PYTHONPATH=/opt/oda/site).

Sets the CPU-time limit from ODA_CPU_LIMIT_S (SIGXCPU at the limit, SIGKILL a second later):
gVisor enforces a limit set from inside though not one given in the OCI spec. Copies
matplotlib's prebuilt font list from the read-only environment into the private /tmp, so the
first plot does not spend a second rebuilding it.
"""

import contextlib
import os
import resource
import shutil

_cpu = os.environ.get("ODA_CPU_LIMIT_S", "")
if _cpu.isdigit():
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CPU, (int(_cpu), int(_cpu) + 1))

_src = os.environ.get("ODA_MPL_CACHE")
_dst = os.environ.get("MPLCONFIGDIR")
if _src and _dst and not os.path.exists(_dst) and os.path.isdir(_src):
    with contextlib.suppress(OSError):
        shutil.copytree(_src, _dst)
