"""Where the lake's files live: a local folder or an S3/MinIO bucket, behind one small interface.

The reader only ever asks three things of a location — the sub-folders of a folder, the Parquet
files under a folder (with their sizes), and a file's Parquet footer — so that partition pruning
happens by listing exactly the folders a request needs, never by globbing the whole lake.
Polars reads the data itself, from the URIs and storage options given here.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import pyarrow.parquet as pq
import urllib3
from minio import Minio

from oda_analyst.errors import LakeError, LakeNotFoundError

GENERATE_HINT = "generate one with `oda-analyst lake generate --profile sample` or set ODA_LAKE"
S3_HINT = (
    "check ODA_LAKE (s3://bucket/prefix), ODA_S3_ENDPOINT and the S3 credentials "
    "(ODA_S3_ACCESS_KEY, ODA_S3_SECRET_KEY)"
)


@dataclass(frozen=True)
class FileInfo:
    """One Parquet file: its path relative to the lake root, its size in bytes and a version
    stamp (modification time in ns for a local file, the ETag for an S3 object; "" if unknown):
    what a cache key needs to tell a rewritten file from the one a graph was built from."""

    rel: str
    size: int
    stamp: str = ""


class Storage(Protocol):
    """What the reader needs of a lake location."""

    location: str

    def check(self) -> None:
        """Raise LakeNotFoundError when the location does not exist or cannot be reached."""

    def list_dirs(self, rel: str) -> list[str]:
        """Names of the direct sub-folders of ``rel`` ("" is the root); [] when absent."""

    def list_files(self, rel: str) -> list[FileInfo]:
        """Parquet files anywhere under folder ``rel``, sorted by path; [] when absent."""

    def uri(self, rel: str) -> str:
        """The path or URL of ``rel`` as Polars reads it."""

    def read_metadata(self, file: FileInfo) -> pq.FileMetaData:
        """The Parquet footer of one file (schema, row count); LakeError naming it if bad."""

    def polars_options(self) -> dict[str, str] | None:
        """Storage options for ``pl.scan_parquet`` (None for local files)."""


def _is_data_file(name: str) -> bool:
    # Spark/Hadoop leave _SUCCESS, .crc and similar beside the data; only *.parquet is data.
    return name.endswith(".parquet") and not name.startswith(("_", "."))


def _unreadable(where: str, exc: Exception) -> LakeError:
    return LakeError(
        f"cannot read Parquet file {where}: {exc}",
        hint="the file is damaged or not Parquet; rewrite or remove that partition",
    )


class LocalStorage:
    """A lake in a local folder."""

    def __init__(self, root: Path) -> None:
        self.root = root.expanduser()
        self.location = str(self.root)

    def check(self) -> None:
        if not self.root.is_dir():
            raise LakeNotFoundError(f"lake folder {self.root} does not exist", hint=GENERATE_HINT)

    def list_dirs(self, rel: str) -> list[str]:
        folder = self.root / rel
        if not folder.is_dir():
            return []
        with os.scandir(folder) as entries:
            return sorted(e.name for e in entries if e.is_dir() and not e.name.startswith("."))

    def list_files(self, rel: str) -> list[FileInfo]:
        folder = self.root / rel
        if not folder.is_dir():
            return []
        found = []
        for dirpath, _dirs, names in os.walk(folder):
            for name in names:
                if _is_data_file(name):
                    path = Path(dirpath) / name
                    st = path.stat()
                    rel = path.relative_to(self.root).as_posix()
                    found.append(FileInfo(rel, st.st_size, str(st.st_mtime_ns)))
        return sorted(found, key=lambda f: f.rel)

    def uri(self, rel: str) -> str:
        return str(self.root / rel)

    def read_metadata(self, file: FileInfo) -> pq.FileMetaData:
        path = self.uri(file.rel)
        try:
            return pq.read_metadata(path)
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for bad files
            raise _unreadable(path, exc) from None

    def polars_options(self) -> dict[str, str] | None:
        return None


class _RangeReader(io.RawIOBase):
    """A read-only, seekable file over one S3 object, fetching byte ranges on demand.

    pyarrow only needs the footer at the end of the file, so reading the metadata of a large
    Parquet object costs one or two small ranged GETs instead of a download.
    """

    def __init__(self, client: Any, bucket: str, key: str, size: int) -> None:
        super().__init__()
        self._client, self._bucket, self._key, self._size = client, bucket, key, size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        length = min(len(buffer), self._size - self._pos)
        if length <= 0:
            return 0
        response = self._client.get_object(self._bucket, self._key, self._pos, length)
        try:
            data = response.read()
        finally:
            response.close()
            response.release_conn()
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)


S3_ATTEMPTS = 3  # one try and two retries, with exponential back-off between them


def _seconds(value: str | None, default: float) -> float:
    """A timeout option as object_store writes it ("30s", "1.5s") or a plain number."""
    if not value:
        return default
    try:
        return float(value.strip().removesuffix("s"))
    except ValueError:
        raise LakeNotFoundError(
            f"invalid S3 timeout {value!r}", hint="give seconds, e.g. 30s (ODA_S3_TIMEOUT_S)"
        ) from None


def _option(options: Mapping[str, str], key: str, env: str) -> str | None:
    value = options.get(key) or options.get(key.removeprefix("aws_")) or os.environ.get(env)
    return value or None


class S3Storage:
    """A lake under ``s3://bucket/prefix`` on S3 or MinIO, listed with the ``minio`` client."""

    def __init__(self, location: str, storage_options: Mapping[str, str] | None) -> None:
        parts = urlsplit(location)
        if parts.scheme != "s3" or not parts.netloc:
            raise LakeNotFoundError(f"not an s3:// lake URI: {location!r}", hint=S3_HINT)
        self.location = location.rstrip("/")
        self.bucket = parts.netloc
        self.prefix = parts.path.strip("/")
        self._options = dict(storage_options or {})
        self._client = self._make_client()

    def _make_client(self) -> Any:
        opts = self._options
        endpoint = (
            _option(opts, "aws_endpoint_url", "AWS_ENDPOINT_URL") or "https://s3.amazonaws.com"
        )
        url = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        self.endpoint = f"{url.scheme}://{url.netloc}"
        # Few retries and short timeouts: an unreachable or stalled endpoint must fail in
        # seconds with a hint, not after minio's default minutes of back-off. The read timeout
        # is the "timeout" option Polars' object store also honours (ODA_S3_TIMEOUT_S).
        read_s = _seconds(opts.get("timeout"), 60.0)
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=min(3.0, read_s), read=read_s),
            retries=urllib3.Retry(
                total=S3_ATTEMPTS - 1, backoff_factor=0.2, status_forcelist=(502, 503, 504)
            ),
            maxsize=16,
        )
        return Minio(
            url.netloc,
            access_key=_option(opts, "aws_access_key_id", "AWS_ACCESS_KEY_ID"),
            secret_key=_option(opts, "aws_secret_access_key", "AWS_SECRET_ACCESS_KEY"),
            session_token=_option(opts, "aws_session_token", "AWS_SESSION_TOKEN"),
            region=_option(opts, "aws_region", "AWS_REGION") or "us-east-1",
            secure=url.scheme == "https",
            http_client=http,
        )

    def _key(self, rel: str) -> str:
        return "/".join(p for p in (self.prefix, rel.strip("/")) if p)

    def _list(self, rel: str, *, recursive: bool) -> list[Any]:
        prefix = self._key(rel)
        prefix = f"{prefix}/" if prefix else ""
        try:
            return list(self._client.list_objects(self.bucket, prefix=prefix, recursive=recursive))
        except Exception as exc:  # minio raises S3Error, urllib3 MaxRetryError, ...
            raise self._not_found(exc) from None

    def _not_found(self, exc: Exception) -> LakeError:
        code = getattr(exc, "code", None)
        if code == "NoSuchBucket":
            return LakeNotFoundError(f"bucket {self.bucket!r} does not exist", hint=S3_HINT)
        if code is not None:  # an S3 answer: denied, bad credentials, ...
            return LakeError(f"S3 error on {self.location}: {code}: {exc}", hint=S3_HINT)
        if isinstance(exc, ValueError):  # minio validates names before any request
            return LakeNotFoundError(
                f"invalid S3 lake location {self.location}: {exc}", hint=S3_HINT
            )
        reason = getattr(exc, "reason", None) or exc
        return LakeNotFoundError(
            f"cannot reach the S3 endpoint {self.endpoint} of {self.location} after "
            f"{S3_ATTEMPTS} attempts: {type(reason).__name__}",
            hint=S3_HINT,
        )

    def check(self) -> None:
        try:
            exists = self._client.bucket_exists(self.bucket)
        except Exception as exc:
            raise self._not_found(exc) from None
        if not exists:
            raise LakeNotFoundError(f"bucket {self.bucket!r} does not exist", hint=S3_HINT)

    def list_dirs(self, rel: str) -> list[str]:
        objects = self._list(rel, recursive=False)
        return sorted(o.object_name.rstrip("/").rsplit("/", 1)[-1] for o in objects if o.is_dir)

    def list_files(self, rel: str) -> list[FileInfo]:
        skip = len(self.prefix) + 1 if self.prefix else 0
        found = [
            FileInfo(o.object_name[skip:], int(o.size or 0), str(o.etag or "").strip('"'))
            for o in self._list(rel, recursive=True)
            if not o.is_dir and _is_data_file(o.object_name.rsplit("/", 1)[-1])
        ]
        return sorted(found, key=lambda f: f.rel)

    def uri(self, rel: str) -> str:
        return f"s3://{self.bucket}/{self._key(rel)}"

    def read_metadata(self, file: FileInfo) -> pq.FileMetaData:
        reader = _RangeReader(self._client, self.bucket, self._key(file.rel), file.size)
        try:
            return pq.read_metadata(io.BufferedReader(reader, buffer_size=64 * 1024))
        except Exception as exc:
            raise _unreadable(self.uri(file.rel), exc) from None

    def polars_options(self) -> dict[str, str] | None:
        return self._options or None


def open_storage(location: str | Path, storage_options: Mapping[str, str] | None) -> Storage:
    """A LocalStorage or an S3Storage for a lake location (a folder or ``s3://bucket/prefix``)."""
    text = str(location)
    if text.startswith("s3://"):
        return S3Storage(text, storage_options)
    if "://" in text:
        raise LakeNotFoundError(
            f"unsupported lake location {text!r}", hint="use a local folder or an s3:// URI"
        )
    return LocalStorage(Path(text))
