"""The app speaks every language however it was installed: `pip install .` ships each catalogue's .po, and the app
reads it as it is, with no compiled .mo anywhere (make, the image and a plain install all read the same files).

The package is installed into a fresh venv of its own from a copy of the sources holding no .mo, by uv from its
cache (offline, without its dependencies: a .pth file lends it those of this venv).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"
NOT_SOURCES = shutil.ignore_patterns("__pycache__", "*.mo", "*.pyc")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the venv's python, the copy of the sources it was installed from)."""
    if not UV.exists():
        pytest.skip("uv is installed by make (requirements-setup.lock)")
    tmp = tmp_path_factory.mktemp("install")
    sources = tmp / "src"
    sources.mkdir()
    for name in ("app", "templates", "static"):
        shutil.copytree(ROOT / name, sources / name, ignore=NOT_SOURCES)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, sources / name)
    assert not list(sources.rglob("*.mo"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], check=True)
    python = tmp / "venv" / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(UV), "pip", "install", "--quiet", "--offline", "--no-deps", "--python", str(python),
                    str(sources)], check=True, timeout=120)
    return python, sources


def run(python: Path, cwd: Path, code: str) -> str:
    done = subprocess.run([str(python), "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_pip_install_ships_every_catalogue_and_the_installed_app_speaks_french(
        installed: tuple[Path, Path], tmp_path: Path) -> None:
    python, _sources = installed
    out = run(python, tmp_path, """
import app.i18n as i18n
print(i18n.__file__)
print(sorted(p.parent.parent.name for p in i18n.LOCALES_DIR.glob("*/LC_MESSAGES/messages.po")))
print(sorted(p.name for p in i18n.LOCALES_DIR.rglob("*.mo")))
i18n.load_catalogues()
with i18n.speaking("fr"):
    print(i18n.gettext("Next"))
""").splitlines()
    assert out[0].startswith(str(python.parent.parent)), "the installed app, not the repository's"
    assert out[1] == str(sorted(lang for lang in ("fr", "de", "es", "zh")))
    assert out[2] == "[]"
    assert out[3] == "Suivant"


def test_a_page_served_beside_a_plain_install_is_french(installed: tuple[Path, Path]) -> None:
    """As a user runs it: `pip install .`, then the server started in the sources (uvicorn imports app from there)."""
    python, sources = installed
    out = run(python, sources, """
import warnings
warnings.simplefilter("ignore")
from fastapi.testclient import TestClient
import app
from app.main import create_app
page = TestClient(create_app()).get("/?lang=fr&preset=bank-river&stage=qkv")
print(app.__file__)
print(page.status_code, "Suivant" in page.text, '<html lang="fr"' in page.text)
""").splitlines()
    assert out[0] == str(sources / "app" / "__init__.py")
    assert out[1] == "200 True True"
