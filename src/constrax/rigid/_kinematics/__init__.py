"""Bodies and kinematics: SO(3)/SE(3) maps (`_so3`), orientation coordinates
(`_orientation`), rigid bodies and their kinetic energy (`_body`), planar bodies
(`_planar_body`)."""

from ._body import (
    AbstractRigidBody as AbstractRigidBody,
    RigidBody as RigidBody,
    check_inertia as check_inertia,
    check_mass as check_mass,
)
from ._orientation import (
    AbstractOrientation as AbstractOrientation,
    EulerZXZ as EulerZXZ,
    Quaternion as Quaternion,
    RotationMatrix as RotationMatrix,
)
from ._planar_body import PlanarBody as PlanarBody
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
