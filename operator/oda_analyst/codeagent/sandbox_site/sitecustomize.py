"""Imported by Python at start-up inside the sandbox (PYTHONPATH=/opt/oda/site).

Copies matplotlib's prebuilt font list from the read-only environment into the private /tmp,
so the first plot does not spend a second rebuilding it.
"""

import contextlib
import os
import shutil

_src = os.environ.get("ODA_MPL_CACHE")
_dst = os.environ.get("MPLCONFIGDIR")
if _src and _dst and not os.path.exists(_dst) and os.path.isdir(_src):
    with contextlib.suppress(OSError):
        shutil.copytree(_src, _dst)
