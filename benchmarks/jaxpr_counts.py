r"""Deterministic jaxpr equation counts of every benchmark case (no timing, no compiling).

    python benchmarks/jaxpr_counts.py        # writes benchmarks/results/jaxpr_counts.{json,md}
    python benchmarks/jaxpr_counts.py --only chain --by-primitive   # print, per primitive

For each case and contender (constrax, hand-written): `vf` = one evaluation of the vector
field as the rollout traces it, `vf_vjp` = its VJP with respect to state and parameters,
`acc` = `cx.accelerations(...).qdd` as a user traces it (hand: the field's `qdd`),
`acc_vjp` = its VJP with respect to `(q, qd, p)`; counted by `_jaxpr.count_equations`.
`vf_live` = the field's equations left after JAX's dead-code elimination, which `jax.jit`
applies before lowering (`_jaxpr.live_equations`): what is lowered and compiled. (The VJP
counts hold little dead code: JAX's partial evaluation for reverse mode removes it.)
`tests/test_jaxpr_budget.py` fails if a constrax count grows more than 10 % over the
committed file; regenerate it with this command after a deliberate change.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

if __name__ == "__main__":  # the entry point: float64 before constrax or a case makes an array
    jax.config.update("jax_enable_x64", True)

from benchmarks._cases import require_x64  # noqa: E402
from benchmarks._jaxpr import case_counts  # noqa: E402
from benchmarks._report import md_table, versions, write_json  # noqa: E402
from benchmarks.cases import GROUPS, OTHER_CASES, ROLLOUT_CASES  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(_HERE, "results", "jaxpr_counts.json")


def counts(name: str, primitives: bool = False) -> dict:
    """Counts of one case (see the module docstring)."""
    if name in ROLLOUT_CASES:
        return case_counts(ROLLOUT_CASES[name], primitives=primitives)
    return OTHER_CASES[name].counts(primitives=primitives)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="case names or groups")
    parser.add_argument("--out", default=DEFAULT_OUT, help="JSON file to write")
    parser.add_argument(
        "--by-primitive", action="store_true", help="print per-primitive counts, write nothing"
    )
    args = parser.parse_args(argv)
    require_x64()
    names = [*ROLLOUT_CASES, *OTHER_CASES]
    if args.only:
        chosen = {m for n in args.only for m in GROUPS.get(n, [n])}
        unknown = chosen - set(names)
        if unknown:
            raise SystemExit(f"jaxpr_counts.py: unknown case(s) {sorted(unknown)}; valid: {names}")
        names = [n for n in names if n in chosen]
    start = time.perf_counter()
    res = {
        "description": (
            "jaxpr equation counts (benchmarks/_jaxpr.py count_equations): vf = one "
            "vector-field evaluation as the rollout traces it, vf_vjp = its VJP w.r.t. "
            "(state, params), acc = cx.accelerations(...).qdd (hand: the field's qdd), "
            "acc_vjp = its VJP w.r.t. (q, qd, params), vf_live = vf after dead-code "
            "elimination (what jax.jit lowers). Regenerate: "
            "python benchmarks/jaxpr_counts.py"
        ),
        "versions": versions(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cases": {},
    }
    for name in names:
        t0 = time.perf_counter()
        res["cases"][name] = c = counts(name, primitives=args.by_primitive)
        line = "  ".join(
            f"{k} {c['constrax'][k]} / {c['hand'][k]}"
            for k in ("vf", "vf_vjp", "vf_live", "acc", "acc_vjp")
            if k in c["constrax"]
        )
        print(f"{name:20s} {line}   ({time.perf_counter() - t0:.1f} s)", flush=True)
        if args.by_primitive:
            for who in ("constrax", "hand"):
                for measure, hist in c[who].pop("primitives").items():
                    top = ", ".join(f"{k} {v}" for k, v in list(hist.items())[:12])
                    print(f"    {who:8s} {measure:16s} {top}")
    res["wall_s"] = time.perf_counter() - start
    if not args.by_primitive:
        if args.only and os.path.exists(args.out):  # update the selected cases only
            with open(args.out) as fh:
                old = json.load(fh)
            res["cases"] = {**old.get("cases", {}), **res["cases"]}
        write_json(args.out, res)
        md = os.path.splitext(args.out)[0] + ".md"
        with open(md, "w") as fh:
            fh.write(markdown(res))
        print(f"wrote {args.out} and {md} ({res['wall_s']:.0f} s)")
    return res


def markdown(res: dict) -> str:
    """The counts as a markdown table: constrax / hand-written and their ratio."""
    measures = ("vf", "vf_vjp", "vf_live", "acc", "acc_vjp")
    rows = []
    for name, c in res["cases"].items():
        cells = []
        for k in measures:
            if k in c["constrax"]:
                a, b = c["constrax"][k], c["hand"][k]
                cells.append(f"{a} / {b} ({a / b:.1f}x)")
            else:
                cells.append("—")
        rows.append([name, *cells])
    v = res["versions"]
    foot = (
        f"\nconstrax / hand-written jaxpr equations. {res['date_utc']}, jax {v['jax']}, "
        f"diffrax {v['diffrax']}, equinox {v['equinox']}.\n"
    )
    return "\n".join(md_table(["case", *measures], rows)) + "\n" + foot


if __name__ == "__main__":
    main()
