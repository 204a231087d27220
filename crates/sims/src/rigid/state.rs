//! Pipeline state as pytrees: [`Transform`] (pose), [`Motion`] (velocity) and [`State`], Brax's
//! `base.Transform`, `base.Motion` and `base.State` (without the optional contact).

use super::quat::{cross, quat_mul, rotate};
use kiln::prelude::*;

/// Poses of a set of frames: `pos: [..., 3]` (m), `rot: [..., 4]` unit quaternions w-x-y-z.
#[derive(Tree, Clone, Debug)]
pub struct Transform {
    /// Position (m).
    pub pos: Tensor,
    /// Orientation, w-x-y-z.
    pub rot: Tensor,
}

/// Spatial velocities: `vel: [..., 3]` linear (m/s), `ang: [..., 3]` angular (rad/s).
#[derive(Tree, Clone, Debug)]
pub struct Motion {
    /// Linear velocity (m/s).
    pub vel: Tensor,
    /// Angular velocity (rad/s).
    pub ang: Tensor,
}

impl Transform {
    /// `self ∘ t`: `t` expressed in `self`'s frame moved to the outer frame (Brax
    /// `Transform.do(Transform)`): `pos = self.pos + rotate(t.pos, self.rot)`,
    /// `rot = self.rot ⊗ t.rot`.
    pub fn compose(&self, t: &Transform) -> Transform {
        Transform { pos: &self.pos + &rotate(&t.pos, &self.rot), rot: quat_mul(&self.rot, &t.rot) }
    }
}

impl Motion {
    /// Brax `Transform.create(pos=p).do(motion)`: `vel − p × ang = vel + ang × p`, `ang` unchanged —
    /// the velocity of the point at offset `p: [..., 3]` from the reference point.
    pub fn translate(&self, p: &Tensor) -> Motion {
        Motion { vel: &self.vel - &cross(p, &self.ang), ang: self.ang.clone() }
    }
}

/// The state of a maximal-coordinate pipeline (Brax `base.State`), one entry per link (`L`):
/// generalized coordinates `q: [nq]`, `qd: [nv]`; link frames `x` (`[L, 3]`, `[L, 4]`) and their
/// world velocities `xd` (`[L, 3]`, `[L, 3]`). A free joint's `q` is its world position and
/// quaternion; its `qd` is the linear velocity, then the angular velocity in the link frame.
#[derive(Tree, Clone, Debug)]
pub struct State {
    /// `[nq]` joint positions.
    pub q: Tensor,
    /// `[nv]` joint velocities.
    pub qd: Tensor,
    /// World pose of each link frame.
    pub x: Transform,
    /// World velocity of each link frame's origin, and its angular velocity.
    pub xd: Motion,
}
