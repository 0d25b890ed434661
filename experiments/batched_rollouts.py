"""Batched Monte-Carlo rollouts: 10⁴ snake carts with random steering, sharded over all
visible devices; reports throughput in env-steps/s.

    python experiments/batched_rollouts.py [--out DIR] [--quick] [--batch B]

The code lives in `constrax._showcase.batched` (shared with `python -m constrax.showcase`).
Run with `XLA_FLAGS=--xla_force_host_platform_device_count=N` to shard over N CPU devices,
or on a multi-GPU node as is.
"""

import argparse
import json

from constrax._showcase.batched import run as _run


def run(outdir, quick: bool = False, **kwargs) -> dict:
    """Run it; write `batched_rollouts.png`/`.json` into `outdir`; return the figures."""
    return _run(outdir, quick=quick, **kwargs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="experiments/figures")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--batch", type=int, default=None)
    args = parser.parse_args()
    print(json.dumps(run(args.out, quick=args.quick, batch=args.batch), indent=2))
