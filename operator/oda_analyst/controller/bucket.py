"""Artefacts in the lake's object store (MinIO or any S3), through the ``minio`` client.

Every query writes under ``queries/<namespace>/<name>/<uid>/`` of the operator's bucket: the
answer (``answer.json``), the result table (``result.csv``) and what the analysis made. The uid
keeps a re-created query of the same name apart from the old one's files. Calls block: the
reconcilers run them in a thread.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from urllib.parse import urlsplit

from minio import Minio
from minio.error import S3Error

from oda_analyst.config import Settings
from oda_analyst.errors import ConfigError, OdaError


class BucketError(OdaError):
    """The object store refused or could not be reached."""


def query_prefix(namespace: str, name: str, uid: str) -> str:
    return f"queries/{namespace}/{name}/{uid}/"


@dataclass
class Bucket:
    client: Minio
    name: str

    @classmethod
    def from_settings(cls, settings: Settings) -> Bucket:
        if not settings.s3_endpoint:
            raise ConfigError("the operator needs ODA_S3_ENDPOINT for its artefacts bucket",
                              hint="set ODA_S3_ENDPOINT and ODA_OPERATOR_BUCKET")  # fmt: skip
        url = urlsplit(settings.s3_endpoint)
        client = Minio(url.netloc, access_key=settings.s3_access_key,
                       secret_key=settings.s3_secret_key, secure=url.scheme == "https",
                       region=settings.s3_region)  # fmt: skip
        return cls(client, settings.operator_bucket)

    def uri(self, key: str) -> str:
        return f"s3://{self.name}/{key}"

    def ensure(self) -> None:
        try:
            if not self.client.bucket_exists(self.name):
                self.client.make_bucket(self.name)
        except S3Error as exc:
            if exc.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise BucketError(f"cannot create bucket {self.name}: {exc.code}") from None

    def put(self, key: str, data: bytes, content_type: str) -> str:
        try:
            self.client.put_object(self.name, key, io.BytesIO(data), len(data),
                                   content_type=content_type)  # fmt: skip
        except S3Error as exc:
            raise BucketError(f"cannot write {self.uri(key)}: {exc.code}") from None
        return self.uri(key)

    def get(self, key: str) -> bytes:
        try:
            response = self.client.get_object(self.name, key)
        except S3Error as exc:
            raise BucketError(f"cannot read {self.uri(key)}: {exc.code}") from None
        try:
            return bytes(response.read())
        finally:
            response.close()
            response.release_conn()

    def exists(self, key: str) -> bool:
        try:
            self.client.stat_object(self.name, key)
        except S3Error:
            return False
        return True

    def remove_prefix(self, prefix: str) -> int:
        """Delete every object under ``prefix`` (none, or no bucket yet: nothing to do)."""
        removed = 0
        try:
            for obj in self.client.list_objects(self.name, prefix=prefix, recursive=True):
                if obj.object_name:
                    self.client.remove_object(self.name, obj.object_name)
                    removed += 1
        except S3Error as exc:
            if exc.code != "NoSuchBucket":
                raise BucketError(f"cannot delete {self.uri(prefix)}: {exc.code}") from None
        return removed
