"""mkdocs hook: build pages and images from files that live outside `docs/`.

* `experiments/figures/*.png` are served at `experiments/figures/<name>.png` (the gallery
  shows the committed figures without copies of them in `docs/`);
* `notebooks/*.ipynb` become the pages `notebooks/<name>/` (rendered by mkdocs-jupyter,
  which executes them at build time unless `CONSTRAX_DOCS_EXECUTE=false`: mkdocs.yml and
  docs/_hooks/notebooks.py).

The files keep their repository paths, relative to the repository root. The hook runs
before mkdocs-jupyter's own `on_files` (higher priority), so that plugin sees the notebooks
as if they were in `docs/`.
"""

import pathlib

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = pathlib.Path(__file__).resolve().parents[2]
PATTERNS = ("experiments/figures/*.png", "notebooks/*.ipynb")


@event_priority(100)
def on_files(files, config):
    for pattern in PATTERNS:
        for path in sorted(ROOT.glob(pattern)):
            uri = path.relative_to(ROOT).as_posix()
            if files.get_file_from_path(uri) is None:
                files.append(File(uri, str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files
