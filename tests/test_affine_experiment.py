"""The affine-constraints experiment runs in quick mode and its invariants hold."""

import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "experiments", "affine_constraints.py")


@pytest.mark.slow
def test_affine_constraints_experiment_quick_mode_conserves_invariants(tmp_path):
    spec = importlib.util.spec_from_file_location("affine_constraints", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.run(str(tmp_path), quick=True)
    assert all(os.path.exists(p) for p in out["figures"])
    cases = out["cases"]
    assert len(cases) == 6
    for name, m in cases.items():
        assert m["energy_drift"] <= 1e-6, name  # rtol = atol = 1e-8 in quick mode
        assert m["max_constraint_residual"] <= 1e-6, name
    for name in ("2d/gyroscopic", "2d/isochoric"):
        assert cases[name]["det_phi_drift"] <= 1e-6
    assert cases["2d/free"]["det_phi_drift"] > 1e-2
    for name in ("2d/free", "2d/gyroscopic", "2d/isochoric", "2d/conformal"):
        assert cases[name]["spin_drift"] <= 1e-6, name  # hyperelastic V(G): S conserved
    assert cases["2d/rotation-free (d'Alembert)"]["spin_drift"] > 1e-2
