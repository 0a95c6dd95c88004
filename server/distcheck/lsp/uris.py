"""File URIs ⇄ normalised absolute paths, the one spelling of a file the daemon keys its state by."""

from __future__ import annotations

import os

from pygls.uris import from_fs_path, to_fs_path

__all__ = ["norm", "path_of", "uri_of"]


def norm(path: str) -> str:
    """`path` absolute and normalised (symlinks kept: the editor's spelling of the file)."""
    return os.path.normpath(os.path.abspath(path))


def path_of(uri: str) -> str | None:
    """The normalised path of a `file:` URI, None for any other scheme."""
    path = to_fs_path(uri)
    return norm(path) if path else None


def uri_of(path: str) -> str:
    """The `file:` URI of `path` (made absolute)."""
    uri = from_fs_path(os.path.abspath(path))
    return uri if uri is not None else "file://" + os.path.abspath(path)
