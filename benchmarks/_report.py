r"""Reporting of the benchmark results: `machine_info` (machine, versions, date), the JSON
writer and the Markdown helpers (`md_cell`, `md_table`, `ms`, `yes`)."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import time

import diffrax
import jax

import constrax as cx


def _cmd(args: list[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=10).stdout
    except Exception:  # informational only
        return ""


def loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_info() -> dict:
    """CPU model and cores, platform, versions (python, jax, jaxlib, diffrax, equinox,
    constrax), backend, date (UTC), load average, whether the persistent compilation
    cache is on."""
    import equinox
    import jaxlib

    lscpu = _cmd(["lscpu"])
    model = next(
        (ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if ln.startswith("Model name")),
        platform.processor(),
    )
    return {
        "cpu_model": model,
        "cpu_cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "diffrax": diffrax.__version__,
        "equinox": equinox.__version__,
        "constrax": cx.__version__,
        "jax_backend": jax.default_backend(),
        "persistent_compilation_cache": bool(jax.config.jax_enable_compilation_cache)
        and jax.config.jax_compilation_cache_dir is not None,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "loadavg_at_start": loadavg(),
    }


def versions() -> dict:
    """The versions that determine the jaxpr counts."""
    m = machine_info()
    return {k: m[k] for k in ("python", "jax", "jaxlib", "diffrax", "equinox", "constrax")}


def write_json(path: str, obj) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(obj, fh, indent=1)
        fh.write("\n")


def md_cell(value) -> str:
    """`value` as the text of one Markdown table cell. A `|` in it (`max |a − b|`) would end
    the cell, and a header row with one cell too many is no table at all: outside code spans
    it is escaped (`\\|`, rendered as `|`); inside one the table parser leaves it alone, and
    an escape would show."""
    parts = re.split(r"(`[^`]*`)", str(value).replace("\n", " "))
    return "".join(p if p.startswith("`") else re.sub(r"(?<!\\)\|", r"\\|", p) for p in parts)


def md_table(header: list[str], rows: list[list]) -> list[str]:
    """A Markdown table, every cell of the header and the rows through `md_cell`."""
    line = lambda cells: "| " + " | ".join(md_cell(c) for c in cells) + " |"
    return [line(header), "|" + "---|" * len(header), *(line(row) for row in rows)]


def ms(x: float) -> str:
    return f"{1e3 * x:.2f}"


def yes(flag: bool) -> str:
    return "yes" if flag else "no"


def run_fresh(module: str, xla_flags: str = "", args: tuple[str, ...] = ()) -> dict:
    """`python -m <module> --one [args]` in a new process (cold caches; `xla_flags` appended
    to `XLA_FLAGS`, which XLA reads when it starts), from the repository root: the JSON
    object its last line of output prints."""
    import sys

    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    env["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {xla_flags}".strip()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(
        [sys.executable, "-m", module, "--one", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{module} --one failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write_results(out: str | None, name: str, result: dict, report: str) -> None:
    """`<out>/<name>.json` (`result`) and `<out>/<name>.md` (`report`), if `out` is given."""
    if out:
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            f.write(json.dumps(result, indent=1) + "\n")
        with open(os.path.join(out, f"{name}.md"), "w") as f:
            f.write(report)


def _xla_flag(options: dict) -> str:
    return " ".join(f"--{k}={str(v).lower()}" for k, v in options.items())


#: The `XLA_FLAGS` form of the compiler options constrax compiles its own programs with on the
#: CPU (`constrax._compilation`): XLA's LLVM IR emitters instead of its fusion emitters.
LLVM_IR_EMITTERS = _xla_flag(cx._compilation._CPU_COMPILER_OPTIONS)
#: The two XLA settings the emitter benchmarks compare: label -> `XLA_FLAGS` added.
XLA_SETTINGS = {"default (fusion emitters)": "", "LLVM IR emitters": LLVM_IR_EMITTERS}


def machine_line(machine: dict) -> str:
    """One Markdown line: date, CPU, load average at start and end, jax and constrax."""
    return (
        f"- date (UTC): {machine['date_utc']}; {machine['cpu_model']}, {machine['cpu_cores']} "
        f"cores; load average at start {machine['loadavg_at_start']}, at end "
        f"{machine['loadavg_at_end']}; jax {machine['jax']}, constrax {machine['constrax']}"
    )
