r"""Affine bodies (seed 002): configuration $(r, \varphi)$, $\varphi\in GL^+(n)$, $n = 2, 3$.

Bodies, hyperelastic potentials, constraint builders (gyroscopic, isochoric, conformal,
rotation-free) returning ordinary core constraints, derived quantities (affine velocity,
spin, dipoles, reaction dipoles, polar decomposition) and the seed's reduced descriptions
of rotation-free motion as independent code paths.
"""

from ._body import (
    AffineBody as AffineBody,
    affine_lagrangian as affine_lagrangian,
    affine_state as affine_state,
    affine_system as affine_system,
    join as join,
    kinetic_energy as kinetic_energy,
    potential_energy as potential_energy,
    split as split,
)
from ._constraints import (
    conformal as conformal,
    conformal_factor as conformal_factor,
    gyroscopic as gyroscopic,
    isochoric as isochoric,
    rotation_free as rotation_free,
    rotation_free_one_form as rotation_free_one_form,
)
from ._elastic import (
    AbstractHyperelastic as AbstractHyperelastic,
    AbstractPotential as AbstractPotential,
    Hyperelastic as Hyperelastic,
    Potential as Potential,
    StVenantKirchhoff as StVenantKirchhoff,
    green_tensor as green_tensor,
)
from ._quantities import (
    AffineQuantities as AffineQuantities,
    Polar as Polar,
    affine_quantities as affine_quantities,
    affine_spin as affine_spin,
    affine_velocity as affine_velocity,
    angular_momentum as angular_momentum,
    comoving_affine_velocity as comoving_affine_velocity,
    dipole as dipole,
    force as force,
    polar_decomposition as polar_decomposition,
    reaction_dipole as reaction_dipole,
    reaction_force as reaction_force,
)
