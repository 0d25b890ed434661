"""Reusable experiment code behind `python -m constrax.showcase` and `experiments/*.py`.

One module per showcase section, each with `run(outdir, quick=False) -> dict` (the
measured figures; PNGs written into `outdir`). Private: the public entry points are the
`constrax.showcase` command and the scripts in `experiments/`.
"""
