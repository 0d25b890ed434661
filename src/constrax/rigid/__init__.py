r"""`constrax.rigid`: rigid-body kinematics (SO(3)/SE(3)), `RigidBody` kinetic energy,
constraint builders (interconnections, primary velocity constraints, rolling contacts,
knife edges), degeneracy analysis (Briggs 2016, §2.3, §3, §4) and friction forces (Loparo & Vakalis
2002).

Orientation coordinates: `RotationMatrix` (9 entries + 6 orthonormality rows: the
gyroscopic affine body of Sławianowski et al. 2013), `Quaternion` (4 entries + norm row, the
default) or `EulerZXZ` (3 angles, singular at $\theta\in\{0,\pi\}$).

For writing contact geometry of one's own: `safe_reciprocal`, `safe_rsqrt`, `safe_sqrt`
are zero (with zero derivatives) where the plain function is singular, and their
derivative rules reuse the value, so derivatives of every order stay products (cheaper
kernels under XLA:CPU than the repeated divisions of `1 / x` or `jnp.sqrt`).
"""

from ._body import (
    AbstractRigidBody as AbstractRigidBody,
    RigidBody as RigidBody,
    check_inertia as check_inertia,
    check_mass as check_mass,
)
from ._contacts import (
    Disk as Disk,
    Plane as Plane,
    Sphere as Sphere,
    angular_velocity_constraint as angular_velocity_constraint,
    body_constraints as body_constraints,
    contact_offset as contact_offset,
    interconnection as interconnection,
    knife_edge as knife_edge,
    no_slip as no_slip,
    plane_contact as plane_contact,
    rolling_contact as rolling_contact,
    rotating_plane as rotating_plane,
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
from ._kinematic_tree import KinematicTree as KinematicTree
from ._mjcf import MJCFSystem as MJCFSystem, from_mjcf as from_mjcf
from ._mjcf_checks import MJCFError as MJCFError, MJCFWarning as MJCFWarning
from ._orientation import (
    AbstractOrientation as AbstractOrientation,
    EulerZXZ as EulerZXZ,
    Quaternion as Quaternion,
    RotationMatrix as RotationMatrix,
)
from ._so3 import (
    body_angular_velocity as body_angular_velocity,
    body_translational_velocity as body_translational_velocity,
    euler_zxz_to_rotation as euler_zxz_to_rotation,
    hat as hat,
    orthonormality_residual as orthonormality_residual,
    project_to_so3 as project_to_so3,
    quaternion_conjugate as quaternion_conjugate,
    quaternion_from_axis_angle as quaternion_from_axis_angle,
    quaternion_from_rotation as quaternion_from_rotation,
    quaternion_multiply as quaternion_multiply,
    quaternion_rotate as quaternion_rotate,
    quaternion_to_rotation as quaternion_to_rotation,
    rotation_from_axis_angle as rotation_from_axis_angle,
    safe_reciprocal as safe_reciprocal,
    safe_rsqrt as safe_rsqrt,
    safe_sqrt as safe_sqrt,
    spatial_angular_velocity as spatial_angular_velocity,
    spatial_translational_velocity as spatial_translational_velocity,
    vee as vee,
)
from ._switching import (
    ContactTrajectory as ContactTrajectory,
    simulate_contacts as simulate_contacts,
)
from ._tree_body import TreeBody as TreeBody
from ._tree_dynamics import TreeDynamics as TreeDynamics
