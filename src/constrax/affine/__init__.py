r"""Affine bodies: configuration $(r, \varphi)$, $\varphi\in GL^+(n)$, $n = 2, 3$.

Affine bodies and their constraints after Sławianowski et al. 2013 (docs/concepts/affine.md).

Bodies, hyperelastic potentials, constraint builders (gyroscopic, isochoric, conformal,
rotation-free) returning ordinary core constraints, derived quantities (affine velocity,
spin, dipoles, reaction dipoles, polar decomposition) and the published reduced descriptions
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
from ._reduced import (
    ReducedTrajectory as ReducedTrajectory,
    printed_usual_terms as printed_usual_terms,
    printed_vakonomic_kinetic as printed_vakonomic_kinetic,
    reduced_dipole as reduced_dipole,
    reduced_vakonomic_system as reduced_vakonomic_system,
    rotation_free_omega_hat as rotation_free_omega_hat,
    simulate_reduced as simulate_reduced,
    sym_from_vec as sym_from_vec,
    usual_rotation_free_acceleration as usual_rotation_free_acceleration,
    usual_rotation_free_residual as usual_rotation_free_residual,
    vakonomic_kinetic as vakonomic_kinetic,
    vakonomic_spin_free_mu0 as vakonomic_spin_free_mu0,
    vec_from_sym as vec_from_sym,
)
