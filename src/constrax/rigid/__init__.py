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

from ._contact import (
    ContactForces as ContactForces,
    ContactTrajectory as ContactTrajectory,
    Disk as Disk,
    Ellipsoid as Ellipsoid,
    FrictionalContact as FrictionalContact,
    Plane as Plane,
    PrimaryConstraintAnalysis as PrimaryConstraintAnalysis,
    Sphere as Sphere,
    SphericalSurface as SphericalSurface,
    angular_rows as angular_rows,
    angular_velocity_constraint as angular_velocity_constraint,
    body_constraints as body_constraints,
    body_force as body_force,
    combine_forces as combine_forces,
    contact_offset as contact_offset,
    coulomb_rolling_friction as coulomb_rolling_friction,
    coulomb_spin_friction as coulomb_spin_friction,
    interconnection as interconnection,
    knife_edge as knife_edge,
    no_slip as no_slip,
    plane_contact as plane_contact,
    primary_constraint_analysis as primary_constraint_analysis,
    rolling_contact as rolling_contact,
    rotating_plane as rotating_plane,
    simulate_contacts as simulate_contacts,
    sliding_friction as sliding_friction,
    translational_rows as translational_rows,
    translational_velocity_constraint as translational_velocity_constraint,
    twist_analysis as twist_analysis,
    twist_rows as twist_rows,
    viscous_rolling_friction as viscous_rolling_friction,
    viscous_spin_friction as viscous_spin_friction,
)
from ._kinematics import (
    AbstractOrientation as AbstractOrientation,
    AbstractRigidBody as AbstractRigidBody,
    EulerZXZ as EulerZXZ,
    PlanarBody as PlanarBody,
    Quaternion as Quaternion,
    RigidBody as RigidBody,
    RotationMatrix as RotationMatrix,
    body_angular_velocity as body_angular_velocity,
    body_translational_velocity as body_translational_velocity,
    check_inertia as check_inertia,
    check_mass as check_mass,
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
from ._tree import (
    KinematicTree as KinematicTree,
    MJCFError as MJCFError,
    MJCFSystem as MJCFSystem,
    MJCFWarning as MJCFWarning,
    TreeBody as TreeBody,
    TreeDynamics as TreeDynamics,
    from_mjcf as from_mjcf,
)
