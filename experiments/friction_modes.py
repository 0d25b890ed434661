"""A ball that skids, rolls, then slides, as Coulomb friction decides (`cx.rigid.FrictionalContact`,
`cx.rigid.simulate_contacts`): the showcase's "Rolling or sliding" section, full size.

A homogeneous ball (mass 2, radius 0.1) is launched at 1 m/s without spin on a horizontal
plane (mu_s = 0.4, mu_k = 0.2) and pushed at its centre by a growing force F = k t
(k = 20 N/s). It skids until its slip v - a omega vanishes, rolls while the friction it
needs, 2F/7, stays below mu_s m g, and slides from t = 7 mu_s m g / (2k) on. The figure
shows the slip speed, the centre speed and the rolling speed a omega, and the energy
friction has dissipated (flat while the ball rolls). Dashed lines: the closed-form
switching times. The code is `constrax._showcase.friction`.

Run: `python experiments/friction_modes.py` -> `experiments/figures/friction_modes.png`
and `friction_modes.json`.
"""

import argparse
import json
import os

from constrax._showcase.friction import run

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "figures"))
    print(json.dumps(run(parser.parse_args().out), indent=2))
