"""Kinematic trees: MuJoCo's forward kinematics (`_kinematic_tree`), a frame of the
tree as a body (`_tree_body`), the tree-structured dynamics (`_tree_dynamics`, on the
spatial-vector algebra of `_spatial`, the static index layout of `_tree_layout` and the
armature of `_armature`) and the MJCF importer (`_mjcf`: `from_mjcf`, composing the model's
terms of `_mjcf_terms`, its checks `_mjcf_checks` and its equalities `_mjcf_equalities`
into the `MJCFSystem` of `_mjcf_system`)."""

from ._kinematic_tree import KinematicTree as KinematicTree
from ._mjcf import from_mjcf as from_mjcf
from ._mjcf_checks import MJCFError as MJCFError, MJCFWarning as MJCFWarning
from ._mjcf_system import MJCFSystem as MJCFSystem
from ._tree_body import TreeBody as TreeBody
from ._tree_dynamics import TreeDynamics as TreeDynamics
