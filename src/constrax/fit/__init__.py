"""`constrax.fit`: differentiable workflows — parameter identification and trajectory
optimisation through `cx.simulate` (docs/concepts/gradients.md)."""

from ._checkpoint import load_checkpoint as load_checkpoint, save_checkpoint as save_checkpoint
from ._collocation import HermiteSimpson as HermiteSimpson, Trapezoidal as Trapezoidal
from ._continuation import Continuation as Continuation, continuation as continuation
from ._controls import (
    AbstractControl as AbstractControl,
    PiecewiseLinear as PiecewiseLinear,
    Tabulated as Tabulated,
)
from ._guesses import path_guess as path_guess, simulated_guess as simulated_guess
from ._identify import (
    IdentificationProblem as IdentificationProblem,
    Uncertainty as Uncertainty,
    uncertainty as uncertainty,
)
from ._ipopt import IPOPT as IPOPT
from ._multiple_shooting import DirectMultipleShooting as DirectMultipleShooting
from ._observations import Observations as Observations
from ._ocp import OptimalControlProblem as OptimalControlProblem
from ._optimal_control import (
    OptimalControlSolution as OptimalControlSolution,
    Stage as Stage,
    solve_optimal_control as solve_optimal_control,
)
from ._problem import AbstractProblem as AbstractProblem, default_adjoint as default_adjoint
from ._shooting import (
    AbstractShooting as AbstractShooting,
    MultipleShooting as MultipleShooting,
    SingleShooting as SingleShooting,
)
from ._solve import EarlyStopping as EarlyStopping, FitResult as FitResult, solve as solve
from ._trajopt import TrajectoryProblem as TrajectoryProblem
from ._transcription import AbstractTranscription as AbstractTranscription
from ._transforms import (
    AbstractTransform as AbstractTransform,
    Bounded as Bounded,
    Identity as Identity,
    Positive as Positive,
    constrain as constrain,
    unconstrain as unconstrain,
)
