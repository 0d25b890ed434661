"""mkdocs hook: the package's version (from `pyproject.toml`, the one place it is written)
in the site's header and footer.

`site_name` becomes `constrax 0.1.0` (the header and the pages' titles), and a `{version}`
in `copyright` (the footer) is replaced by it.
"""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def version() -> str:
    """`[project] version` of pyproject.toml (no `tomllib` before Python 3.11)."""
    project = (ROOT / "pyproject.toml").read_text().split("[project]", 1)[1]
    return re.search(r'^version\s*=\s*"([^"]+)"', project, flags=re.M).group(1)


def on_config(config):
    v = version()
    if not config["site_name"].endswith(v):
        config["site_name"] = f"{config['site_name']} {v}"
    if config.get("copyright"):
        config["copyright"] = config["copyright"].replace("{version}", v)
    return config
