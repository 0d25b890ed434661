"""Kinematic trees: MuJoCo's forward kinematics (`_kinematic_tree`), a frame of the
tree as a body (`_tree_body`), the tree-structured dynamics (`_tree_dynamics`) and the MJCF
importer (`_mjcf`, its checks `_mjcf_checks`, its equalities `_mjcf_equalities`)."""

from ._kinematic_tree import KinematicTree as KinematicTree
from ._mjcf import MJCFSystem as MJCFSystem, from_mjcf as from_mjcf
from ._mjcf_checks import MJCFError as MJCFError, MJCFWarning as MJCFWarning
from ._tree_body import TreeBody as TreeBody
from ._tree_dynamics import TreeDynamics as TreeDynamics
