"""The built-in payload storage drivers: a directory, and a dict for tests.

Both hand out URIs that name a key under their own root, refuse any other
(``ValueError``), and say which key a URI names (``key_of``), so the codec can
check that a reference stays inside the engine's prefix. The Django-storage
driver lives in ``durable_workflow.payload_storage``.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import tempfile
import time
import urllib.parse


def check_key(key: str) -> None:
    """Refuse keys (and prefixes) that are absolute, climb out, or hide a NUL."""
    parts = key.split("/")
    if (
        not key
        or key.startswith("/")
        or "\\" in key
        or "\x00" in key
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise ValueError(f"invalid payload storage key or prefix {key!r}")


class FilesystemDriver:
    """``file://`` objects under a root directory shared by every worker.

    Writes go to a temporary file renamed into place, so a reader never sees a
    partial object.  URIs outside ``root`` (after resolving symlinks) are refused.
    """

    def __init__(self, root: str | os.PathLike[str]):
        self.root = pathlib.Path(root).expanduser().resolve()

    def __repr__(self) -> str:
        return f"FilesystemDriver({str(self.root)!r})"

    def _path(self, uri: str) -> pathlib.Path:
        parts = urllib.parse.urlsplit(uri)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            raise ValueError(f"{uri!r} is not a local file:// URI")
        path = pathlib.Path(urllib.parse.unquote(parts.path)).resolve()
        if not path.is_relative_to(self.root) or path == self.root:
            raise ValueError(f"{uri!r} is outside {self.root}")
        return path

    def key_of(self, uri: str) -> str:
        return self._path(uri).relative_to(self.root).as_posix()

    def put(self, key: str, data: bytes) -> str:
        check_key(key)
        path = self.root / key
        if path.is_file() and path.stat().st_size == len(data):
            os.utime(path)  # same key, same bytes: only mark it as written now
            return path.as_uri()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return path.as_uri()

    def get(self, uri: str) -> bytes:
        return self._path(uri).read_bytes()

    def delete(self, uri: str) -> None:
        self._path(uri).unlink(missing_ok=True)

    def last_modified(self, uri: str) -> float | None:
        try:
            return self._path(uri).stat().st_mtime
        except FileNotFoundError:
            return None


class MemoryDriver:
    """``memory://<name>/<key>`` objects in a dict: tests and single-process experiments."""

    def __init__(self, name: str = "default"):
        self.name = name
        self.objects: dict[str, bytes] = {}
        self.written: dict[str, float] = {}
        self.puts = 0

    def __repr__(self) -> str:
        return f"MemoryDriver({self.name!r})"

    def uri(self, key: str) -> str:
        return f"memory://{self.name}/{key}"

    def key_of(self, uri: str) -> str:
        base = f"memory://{self.name}/"
        if not uri.startswith(base):
            raise ValueError(f"{uri!r} does not belong to {self!r}")
        return uri[len(base) :]

    key = key_of

    def put(self, key: str, data: bytes) -> str:
        check_key(key)
        self.puts += 1
        self.objects.setdefault(key, bytes(data))
        self.written[key] = time.time()
        return self.uri(key)

    def get(self, uri: str) -> bytes:
        key = self.key(uri)
        try:
            return self.objects[key]
        except KeyError:
            raise FileNotFoundError(uri) from None

    def delete(self, uri: str) -> None:
        key = self.key(uri)
        self.objects.pop(key, None)
        self.written.pop(key, None)

    def last_modified(self, uri: str) -> float | None:
        return self.written.get(self.key(uri))
