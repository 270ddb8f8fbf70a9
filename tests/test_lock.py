"""The lock files: every dependency pinned to one version with its hashes, the runtime lock inside the
test lock, both agreeing with pyproject.toml, and the environment running these tests installed from
them (`make test` installs requirements-test.lock; the Dockerfile requirements.lock)."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)(?:\s*;\s*([^\\]+?))?\s*\\")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    """name → version of every package the lock file pins for this interpreter (the lock covers every
    Python from 3.11: a package may be pinned once per Python range); each must carry a hash."""
    text = path.read_text()
    found: dict[str, str] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = PIN.match(block.strip())
        if not m:
            continue
        assert "--hash=sha256:" in block, f"{path.name}: {m.group(1)} has no hash"
        if m.group(3) is None or Marker(m.group(3)).evaluate():
            found[canonical(m.group(1))] = m.group(2)
    return found


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


RUNTIME = pins(ROOT / "requirements.lock")
TEST = pins(ROOT / "requirements-test.lock")


@pytest.mark.parametrize(("lock", "extras"), [(RUNTIME, ()), (TEST, ("test",))], ids=["runtime", "test"])
def test_every_dependency_is_pinned_within_its_range(lock: dict[str, str], extras: tuple[str, ...]) -> None:
    wanted = [Requirement(r) for r in project()["dependencies"]]
    for extra in extras:
        wanted += [Requirement(r) for r in project()["optional-dependencies"][extra]]
    for req in wanted:
        name = canonical(req.name)
        assert name in lock, f"{req.name} is not in the lock: run `make lock`"
        assert req.specifier.contains(lock[name], prereleases=True), \
            f"{req.name}=={lock[name]} is outside pyproject.toml's {req.specifier}: run `make lock`"


def test_the_runtime_lock_is_the_test_lock_without_the_test_tools() -> None:
    assert RUNTIME, "requirements.lock pins nothing"
    for name, version in RUNTIME.items():
        assert TEST.get(name) == version, f"{name}: {version} at run time, {TEST.get(name)} under test"


def test_these_tests_run_on_the_locked_versions() -> None:
    """The environment is the test lock's: what passes here is what the image installs."""
    wrong = []
    for name, version in TEST.items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # a platform-conditional package (e.g. colorama on Windows)
        if installed != version:
            wrong.append(f"{name} {installed} (locked {version})")
    assert not wrong, "installed versions differ from requirements-test.lock: " + ", ".join(wrong)


def test_the_installer_is_pinned_with_its_hashes_and_is_the_one_installed() -> None:
    """make installs uv from requirements-setup.lock, with pip's --require-hashes, and uv installs the rest."""
    setup = pins(ROOT / "requirements-setup.lock")
    assert list(setup) == ["uv"], setup
    assert metadata.version("uv") == setup["uv"]
