r"""`constrax.rigid`: rigid-body kinematics (SO(3)/SE(3)), `RigidBody` kinetic energy,
constraint builders (interconnections, primary velocity constraints, rolling contacts,
knife edges), degeneracy analysis (seed 003 §2.3, §3, §4) and friction forces (seed 000).

Orientation coordinates: `RotationMatrix` (9 entries + 6 orthonormality rows: the
gyroscopic affine body of seed 002), `Quaternion` (4 entries + norm row, the default) or
`EulerZXZ` (3 angles, singular at $\theta\in\{0,\pi\}$).
"""

from ._body import RigidBody as RigidBody
from ._contacts import (
    Disk as Disk,
)
from ._contacts import (
    Plane as Plane,
)
from ._contacts import (
    Sphere as Sphere,
)
from ._contacts import (
    angular_velocity_constraint as angular_velocity_constraint,
)
from ._contacts import (
    body_constraints as body_constraints,
)
from ._contacts import (
    contact_offset as contact_offset,
)
from ._contacts import (
    interconnection as interconnection,
)
from ._contacts import (
    knife_edge as knife_edge,
)
from ._contacts import (
    no_slip as no_slip,
)
from ._contacts import (
    plane_contact as plane_contact,
)
from ._contacts import (
    rolling_contact as rolling_contact,
)
from ._contacts import (
    rotating_plane as rotating_plane,
)
from ._contacts import (
    translational_velocity_constraint as translational_velocity_constraint,
)
from ._degeneracy import (
    PrimaryConstraintAnalysis as PrimaryConstraintAnalysis,
)
from ._degeneracy import (
    angular_rows as angular_rows,
)
from ._degeneracy import (
    primary_constraint_analysis as primary_constraint_analysis,
)
from ._degeneracy import (
    translational_rows as translational_rows,
)
from ._degeneracy import (
    twist_analysis as twist_analysis,
)
from ._degeneracy import (
    twist_rows as twist_rows,
)
from ._friction import (
    body_force as body_force,
)
from ._friction import (
    combine_forces as combine_forces,
)
from ._friction import (
    coulomb_rolling_friction as coulomb_rolling_friction,
)
from ._friction import (
    coulomb_spin_friction as coulomb_spin_friction,
)
from ._friction import (
    sliding_friction as sliding_friction,
)
from ._friction import (
    viscous_rolling_friction as viscous_rolling_friction,
)
from ._friction import (
    viscous_spin_friction as viscous_spin_friction,
)
from ._orientation import (
    AbstractOrientation as AbstractOrientation,
)
from ._orientation import (
    EulerZXZ as EulerZXZ,
)
from ._orientation import (
    Quaternion as Quaternion,
)
from ._orientation import (
    RotationMatrix as RotationMatrix,
)
from ._so3 import (
    body_angular_velocity as body_angular_velocity,
)
from ._so3 import (
    body_translational_velocity as body_translational_velocity,
)
from ._so3 import (
    euler_zxz_to_rotation as euler_zxz_to_rotation,
)
from ._so3 import (
    hat as hat,
)
from ._so3 import (
    orthonormality_residual as orthonormality_residual,
)
from ._so3 import (
    project_to_so3 as project_to_so3,
)
from ._so3 import (
    quaternion_conjugate as quaternion_conjugate,
)
from ._so3 import (
    quaternion_from_axis_angle as quaternion_from_axis_angle,
)
from ._so3 import (
    quaternion_from_rotation as quaternion_from_rotation,
)
from ._so3 import (
    quaternion_multiply as quaternion_multiply,
)
from ._so3 import (
    quaternion_to_rotation as quaternion_to_rotation,
)
from ._so3 import (
    rotation_from_axis_angle as rotation_from_axis_angle,
)
from ._so3 import (
    spatial_angular_velocity as spatial_angular_velocity,
)
from ._so3 import (
    spatial_translational_velocity as spatial_translational_velocity,
)
from ._so3 import (
    vee as vee,
)
