"""A user's two folders: ``in/`` (uploads, read-only in the sandbox) and ``out/`` (results).

Names are plain file names (no folders, no leading dot). Files the sandbox produced are read
without following symbolic links, so code cannot make the host read ``/etc/shadow`` for it by
leaving ``out/x.png -> /etc/shadow`` behind.
"""

from __future__ import annotations

import mimetypes
import os
import re
import shutil
import stat
from pathlib import Path

from oda_analyst.codeagent.result import ProducedFile
from oda_analyst.errors import UsageError

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
MEDIA = {
    ".png": "image/png",
    ".csv": "text/csv",
    ".json": "application/json",
    ".txt": "text/plain",
    ".svg": "image/svg+xml",
    ".parquet": "application/vnd.apache.parquet",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


def safe_name(name: str) -> str:
    """``name`` if it is a plain file name, else UsageError saying what is allowed."""
    if not _NAME.match(name) or ".." in name:
        raise UsageError(
            f"invalid file name {name!r}",
            hint="use a plain name of letters, digits, '_', '.', '-' (no folders), e.g. data.csv",
        )
    return name


def media_type(name: str) -> str:
    suffix = Path(name).suffix.lower()
    return MEDIA.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


class Workspace:
    """``root/in`` and ``root/out``, made readable/writable by the sandbox's user."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.inputs = root / "in"
        self.outputs = root / "out"
        for d in (self.inputs, self.outputs):
            d.mkdir(parents=True, exist_ok=True)
        root.chmod(0o755)
        self.inputs.chmod(0o755)
        self.outputs.chmod(0o755)  # the backend gives it to the uid its code writes as

    def put(self, name: str, data: bytes) -> Path:
        """Write an input file (replacing one of the same name)."""
        path = self.inputs / safe_name(name)
        path.write_bytes(data)
        path.chmod(0o644)
        return path

    def add(self, source: Path) -> Path:
        """Copy a host file into in/ under its own name."""
        return self.put(source.name, source.read_bytes())

    def outputs_list(self) -> list[ProducedFile]:
        """Regular files in out/ (links, folders and devices are not results)."""
        files = []
        for entry in sorted(os.scandir(self.outputs), key=lambda e: e.name):
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and _NAME.match(entry.name):
                files.append(
                    ProducedFile(
                        name=entry.name, bytes=st.st_size, media_type=media_type(entry.name)
                    )
                )
        return files

    def read_output(self, name: str, max_bytes: int) -> bytes:
        """The bytes of a produced file, never through a symbolic link, at most ``max_bytes``."""
        path = self.outputs / safe_name(name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            raise UsageError(
                f"no file {name!r} in out/", hint="list the files with the last execution's result"
            ) from None
        except OSError:
            raise UsageError(
                f"{name!r} is not a regular file", hint="produce a regular file"
            ) from None
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise UsageError(f"{name!r} is not a regular file", hint="produce a regular file")
            data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise UsageError(
                f"{name!r} is larger than {max_bytes} bytes",
                hint="write a smaller file (fewer points, lower dpi)",
            )
        return data

    def enforce_out_limit(self, max_bytes: int) -> list[str]:
        """Remove what is not a regular file, then the largest files until out/ fits; the names."""
        removed = []
        entries = list(os.scandir(self.outputs))
        for entry in entries:
            if not entry.is_file(follow_symlinks=False):
                _remove(Path(entry.path))
                removed.append(entry.name)
        files = sorted(self.outputs_list(), key=lambda f: f.bytes)
        total = sum(f.bytes for f in files)
        while files and total > max_bytes:
            big = files.pop()
            (self.outputs / big.name).unlink(missing_ok=True)
            total -= big.bytes
            removed.append(big.name)
        return removed

    def clear_outputs(self) -> None:
        for entry in list(os.scandir(self.outputs)):
            _remove(Path(entry.path))

    def destroy(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
