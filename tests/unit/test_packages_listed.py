"""Every package folder is in pyproject's `packages`: setuptools builds the wheel (and the
image, `pip install .`) from that list alone, so a folder left out installs in editable mode,
where every test runs, and is missing from the image."""

from __future__ import annotations

import tomllib

from tests.unit.imports_walk import ROOT, package_dirs


def test_every_package_folder_is_listed():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(conf["packages"])
    found = set()
    for pkg, folder in package_dirs().items():
        for init in folder.rglob("__init__.py"):
            parts = init.parent.relative_to(folder).parts
            if "tests" not in parts and "templates" not in parts:
                found.add(".".join([pkg, *parts]))
    assert sorted(found - listed) == [], "package folders missing from pyproject's packages"
