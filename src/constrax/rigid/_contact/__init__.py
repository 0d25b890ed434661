"""Contacts: shapes (`_shapes`), contact geometry and constraint builders (`_contacts`),
the surfaces they touch (`_surfaces`), degeneracy of the primary constraints
(`_degeneracy`), friction forces (`_friction`), frictional contacts (`_frictional_contact`)
and the walk that switches them between rolling, sliding and separated (`_switching`, over
`_mode_dynamics`, `_mode_switch`, `_impact`, `_contact_run`, `_contact_trajectory` and
`_run_checks`)."""

from ._contact_trajectory import ContactForces as ContactForces
from ._contacts import (
    angular_velocity_constraint as angular_velocity_constraint,
    body_constraints as body_constraints,
    contact_offset as contact_offset,
    interconnection as interconnection,
    knife_edge as knife_edge,
    no_slip as no_slip,
    plane_contact as plane_contact,
    rolling_contact as rolling_contact,
    translational_velocity_constraint as translational_velocity_constraint,
)
from ._degeneracy import (
    PrimaryConstraintAnalysis as PrimaryConstraintAnalysis,
    angular_rows as angular_rows,
    primary_constraint_analysis as primary_constraint_analysis,
    translational_rows as translational_rows,
    twist_analysis as twist_analysis,
    twist_rows as twist_rows,
)
from ._friction import (
    body_force as body_force,
    combine_forces as combine_forces,
    coulomb_rolling_friction as coulomb_rolling_friction,
    coulomb_spin_friction as coulomb_spin_friction,
    sliding_friction as sliding_friction,
    viscous_rolling_friction as viscous_rolling_friction,
    viscous_spin_friction as viscous_spin_friction,
)
from ._frictional_contact import FrictionalContact as FrictionalContact
from ._shapes import Disk as Disk, Ellipsoid as Ellipsoid, Sphere as Sphere
from ._surfaces import (
    Plane as Plane,
    SphericalSurface as SphericalSurface,
    rotating_plane as rotating_plane,
)
from ._switching import (
    ContactTrajectory as ContactTrajectory,
    simulate_contacts as simulate_contacts,
)
