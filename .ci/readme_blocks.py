"""Run every ```python block of README.md on its own, each in a fresh interpreter.

A block that leans on another's imports or settings (a name it does not define, float64
left off) fails here as it fails for a reader who copies that block alone. Prints each
block's first line, its wall time and its output; exits non-zero naming the first block
that failed.

Usage: python .ci/readme_blocks.py [README.md]
"""

import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def python_blocks(text: str) -> list[tuple[int, str]]:
    """The ```python blocks of a markdown text, each with the line it starts on."""
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        blocks.append((text.count("\n", 0, match.start()) + 2, match.group(1)))
    return blocks


def main(argv: list[str]) -> int:
    readme = pathlib.Path(argv[1]) if len(argv) > 1 else ROOT / "README.md"
    blocks = python_blocks(readme.read_text())
    if not blocks:
        print(f"{readme}: no python block found", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:  # blocks may write files: not into the repo
        for line, code in blocks:
            script = pathlib.Path(tmp) / f"README_line{line}.py"
            script.write_text(code)
            print(f"== {readme.name}, the python block at line {line}", flush=True)
            start = time.perf_counter()
            result = subprocess.run([sys.executable, str(script)], cwd=tmp, text=True)
            wall = time.perf_counter() - start
            print(f"   {wall:.1f} s, exit {result.returncode}", flush=True)
            if result.returncode != 0:
                failed = f"{readme.name}: the python block at line {line} fails on its own"
                print(failed, file=sys.stderr)
                return 1
    print(f"{len(blocks)} README blocks ran on their own")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
