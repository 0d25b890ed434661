"""constrax: differentiable constrained Lagrangian dynamics on JAX.

Write a Lagrangian `L(t, q, qd, p)` and constraints as plain JAX functions; constrax
derives mass matrix, bias terms and constraint Jacobians by autodiff, solves for
accelerations and multipliers under the Lagrange–d'Alembert or vakonomic prescription,
and integrates with diffrax.
"""

from . import affine as affine, fit as fit, interop as interop, models as models, rigid as rigid
from ._accessibility import (
    AccessibilityResult as AccessibilityResult,
    accessibility_rank as accessibility_rank,
    distribution_fields as distribution_fields,
    lie_bracket as lie_bracket,
)
from ._batch import Rollouts as Rollouts, rollout_batch as rollout_batch
from ._compare import (
    PrescriptionComparison as PrescriptionComparison,
    compare_prescriptions as compare_prescriptions,
)
from ._compilation import (
    _enable_from_environment,
    enable_compilation_cache as enable_compilation_cache,
)
from ._constraints import (
    AbstractConstraint as AbstractConstraint,
    Holonomic as Holonomic,
    Pfaffian as Pfaffian,
    UnitQuaternion as UnitQuaternion,
    VelocityConstraint as VelocityConstraint,
)
from ._diagnostics import (
    ConstraintRank as ConstraintRank,
    ConstraintResidual as ConstraintResidual,
    constraint_jacobian as constraint_jacobian,
    constraint_rank as constraint_rank,
    constraint_residual as constraint_residual,
    effective_energy as effective_energy,
    energy as energy,
    reaction_power as reaction_power,
)
from ._dynamics import Accelerations as Accelerations, accelerations as accelerations
from ._eigenvalues import (
    Eigenvalues as Eigenvalues,
    IllConditionedWarning as IllConditionedWarning,
    eigenvalues as eigenvalues,
)
from ._geometry import (
    ConstraintDistribution as ConstraintDistribution,
    FrobeniusResult as FrobeniusResult,
    SingularConfigurations as SingularConfigurations,
    constraint_distribution as constraint_distribution,
    curl as curl,
    find_singular_configurations as find_singular_configurations,
    frobenius_residual as frobenius_residual,
    is_integrable as is_integrable,
)
from ._impulse import ImpulsiveJump as ImpulsiveJump, impulsive_jump as impulsive_jump
from ._initial_state import consistent_initial_state as consistent_initial_state
from ._linearise import Linearisation as Linearisation, linearise as linearise
from ._prescriptions import (
    AbstractPrescription as AbstractPrescription,
    DAlembert as DAlembert,
    Vakonomic as Vakonomic,
)
from ._root_finder import Chandrupatla as Chandrupatla
from ._sharding import (
    batch_mesh as batch_mesh,
    pad_batch as pad_batch,
    shard_batch as shard_batch,
    sharded_vmap as sharded_vmap,
)
from ._simulate import simulate as simulate
from ._solve import (
    KKT as KKT,
    AbstractConstraintSolver as AbstractConstraintSolver,
    AutoSolver as AutoSolver,
    UdwadiaKalaba as UdwadiaKalaba,
)
from ._solvers import SemiImplicitEuler as SemiImplicitEuler
from ._stabilisation import (
    AbstractStabilisation as AbstractStabilisation,
    Baumgarte as Baumgarte,
    Projection as Projection,
    StepProjection as StepProjection,
)
from ._step_size import StepSizeWarning as StepSizeWarning
from ._system import System as System
from ._terms import mass_matrix as mass_matrix
from ._trajectory import Trajectory as Trajectory
from ._tvlqr import LQRFeedback as LQRFeedback, closed_loop as closed_loop, tvlqr as tvlqr
from ._unconstrained import (
    AbstractDynamics as AbstractDynamics,
    LagrangianDynamics as LagrangianDynamics,
)

__version__ = "0.1.0"

_enable_from_environment()
