//! Forward and inverse kinematics of a [`Model`] (Brax `kinematics.py`): `q, qd` → link frames
//! and velocities, world frames → joint frames, and joint frames → `q, qd`.
//!
//! Brax groups links by type and depth with `scan.link_types`/`scan.tree`; here the per-link
//! constants (axes, joint frames) are static tensors over the links of one kind, and results are
//! put back in link order with one gather.

use super::model::{LinkKind, Model, OneDof, SlideStack};
use super::quat::{
    cross, dot, inv_rotate, normalize, quat_inv, quat_mul, quat_rot_axis, rotate, signed_angle,
};
use super::state::{Motion, Transform};
use kiln::prelude::*;

/// Brax `world_to_joint`'s results: each link's joint transform and motion relative to its parent
/// anchor, and the parent (`a_p`) and child (`a_c`) anchor frames in the world. All `[L, ...]`.
#[derive(Clone, Debug)]
pub struct JointFrames {
    /// Child anchor in the parent anchor's frame.
    pub j: Transform,
    /// Child motion relative to the parent anchor point, in the parent anchor's frame.
    pub jd: Motion,
    /// Parent anchor frame in the world.
    pub a_p: Transform,
    /// Child anchor frame in the world.
    pub a_c: Transform,
}

/// The static constants of the 1-DoF links, as tensors of the model's dtype (`n` = their number).
pub(crate) struct OneDofLinks {
    /// Their link indices, in link order.
    pub links: Vec<usize>,
    /// Their DoF indices.
    pub dofs: Vec<usize>,
    /// `[n, 3]` Brax `dof.motion.vel` (slide axis or 0).
    pub motion_vel: Tensor,
    /// Rows of the angular joint frame, each `[n, 3]`.
    pub frame_ang: [Tensor; 3],
    /// First row of the linear joint frame, `[n, 3]`.
    pub frame_vel0: Tensor,
    /// `[n, 1]` 1.0 for hinges (Brax `is_rotational`).
    pub is_rot: Tensor,
    /// `[n, 1]` 1.0 for slides (Brax `is_translational`).
    pub is_trans: Tensor,
    /// `[n]` true for hinges (selects the angle rather than the slide in `q`).
    pub is_rot_mask: Tensor,
}

impl OneDofLinks {
    pub(crate) fn new(model: &Model) -> OneDofLinks {
        let joints: Vec<(usize, OneDof)> = model
            .structure
            .kinds
            .iter()
            .enumerate()
            .filter_map(|(l, k)| match k {
                LinkKind::OneDof(d) => Some((l, *d)),
                LinkKind::Free { .. } | LinkKind::Slides(_) => None,
            })
            .collect();
        let n = joints.len();
        let rows = |f: &dyn Fn(&OneDof) -> [f64; 3]| {
            let data: Vec<f64> = joints.iter().flat_map(|(_, d)| f(d)).collect();
            model.constant(&[n, 3], &data)
        };
        let flags = |f: &dyn Fn(&OneDof) -> bool| {
            let data: Vec<f64> = joints.iter().map(|(_, d)| if f(d) { 1.0 } else { 0.0 }).collect();
            model.constant(&[n, 1], &data)
        };
        let is_rot_mask: Vec<bool> = joints.iter().map(|(_, d)| d.is_rotational()).collect();
        OneDofLinks {
            links: joints.iter().map(|(l, _)| *l).collect(),
            dofs: joints.iter().map(|(_, d)| d.dof).collect(),
            motion_vel: rows(&|d| d.motion_vel),
            frame_ang: [rows(&|d| d.frame_ang[0]), rows(&|d| d.frame_ang[1]), rows(&|d| d.frame_ang[2])],
            frame_vel0: rows(&|d| d.frame_vel[0]),
            is_rot: flags(&|d| d.is_rotational()),
            is_trans: flags(&|d| d.is_translational()),
            is_rot_mask: Tensor::from_vec(&[n], is_rot_mask),
        }
    }

    /// Rows `self.links` of a per-link tensor `[L, ...]` (no gather when they are all the links).
    pub(crate) fn rows(&self, x: &Tensor) -> Tensor {
        take_rows(x, &self.links)
    }

    /// Brax `kinematics.axis_angle_ang` for these joints, the parts the pipelines use: the joint
    /// axis carried by the child (`child_frame[0]`), the second frame axis carried by the child
    /// (`child_frame[1]`), and the angle `psi` about the axis. `j_rot: [n, 4]` →
    /// (`[n, 3]`, `[n, 3]`, `[n]`).
    pub(crate) fn axis_angle(&self, j_rot: &Tensor) -> (Tensor, Tensor, Tensor) {
        let [a0, a1, a2] = &self.frame_ang;
        let child: Vec<Tensor> = [a0, a1, a2].iter().map(|a| rotate(a, j_rot)).collect();
        let line_of_nodes = normalize(&cross(&child[2], a0));
        let psi = signed_angle(a0, a1, &line_of_nodes);
        (child[0].clone(), child[1].clone(), psi)
    }
}

/// The static constants of the slide-stack links (Brax link types `2`/`3` of slides), as tensors
/// of the model's dtype (`n` = their number).
pub(crate) struct SlideLinks {
    /// Their link indices, in link order.
    pub links: Vec<usize>,
    /// Their stacks.
    pub stacks: Vec<SlideStack>,
    /// The most slides on one of them (2 or 3); rows past it are zero for every link.
    pub rows: usize,
    /// Row `k` of every link's slide axes (`[n, 3]`; zero past its count: Brax's padding).
    pub axes: [Tensor; 3],
    /// DoF of row `k` of every link (the first slide's past its count, where the axis is zero).
    pub dofs: [Vec<usize>; 3],
    /// `[n, 1]` 1.0 for stacks of two (Brax `_two_dof`), 0.0 for three (`_three_dof`).
    pub is_two: Tensor,
}

impl SlideLinks {
    pub(crate) fn new(model: &Model) -> SlideLinks {
        let (links, stacks): (Vec<usize>, Vec<SlideStack>) = model
            .structure
            .kinds
            .iter()
            .enumerate()
            .filter_map(|(l, k)| match k {
                LinkKind::Slides(st) => Some((l, *st)),
                LinkKind::Free { .. } | LinkKind::OneDof(_) => None,
            })
            .unzip();
        let n = links.len();
        let row = |k: usize| {
            let data: Vec<f64> = stacks.iter().flat_map(|st| st.axes[k]).collect();
            model.constant(&[n, 3], &data)
        };
        let two: Vec<f64> = stacks.iter().map(|st| if st.count == 2 { 1.0 } else { 0.0 }).collect();
        SlideLinks {
            rows: stacks.iter().map(|st| st.count).max().unwrap_or(0),
            axes: [row(0), row(1), row(2)],
            dofs: [0, 1, 2].map(|k| stacks.iter().map(|st| st.dofs[k]).collect()),
            is_two: model.constant(&[n, 1], &two),
            links,
            stacks,
        }
    }

    /// Rows `self.links` of a per-link tensor `[L, ...]`.
    pub(crate) fn rows(&self, x: &Tensor) -> Tensor {
        take_rows(x, &self.links)
    }

    /// `Σₖ axisₖ valueₖ` over the stacks' rows, where `value: [nv]` is gathered per row (`[n, 3]`):
    /// Brax's `jp.sum(vmap(multiply)(motion.vel, tau), 0)` for a joint force, for example.
    pub(crate) fn along_axes(&self, value: &Tensor) -> Tensor {
        let mut sum: Option<Tensor> = None;
        for k in 0..self.rows {
            let v = value.take(&index_tensor(&self.dofs[k]), 0).expand_dims(-1);
            let term = &self.axes[k] * &v;
            sum = Some(match sum {
                None => term,
                Some(s) => &s + &term,
            });
        }
        sum.expect("a slide stack has at least two rows")
    }

    /// Each link's coordinates along its slide axes, row `k` (`[n, 1]` each): `axisₖ · v`.
    pub(crate) fn coords(&self, v: &Tensor) -> Vec<Tensor> {
        (0..self.rows).map(|k| dot(&self.axes[k], v)).collect()
    }
}

/// Rows `idx` of `x` along axis 0 (identity when `idx` is `0..L`).
pub(crate) fn take_rows(x: &Tensor, idx: &[usize]) -> Tensor {
    let n = x.shape().dims()[0];
    if idx.len() == n && idx.iter().enumerate().all(|(i, &k)| i == k) {
        return x.clone();
    }
    x.take(&index_tensor(idx), 0)
}

/// A constant `i32[n]` index tensor.
pub(crate) fn index_tensor(idx: &[usize]) -> Tensor {
    Tensor::from_vec(&[idx.len()], idx.iter().map(|&i| i as i32).collect())
}

/// Brax `kinematics.forward`: link frames `x` and velocities `xd` (each `[L, ...]`) from joint
/// positions `q: [nq]` and velocities `qd: [nv]`, walking the tree from the roots.
pub fn forward(model: &Model, q: &Tensor, qd: &Tensor) -> (Transform, Motion) {
    let s = &model.structure;
    let mut frames: Vec<(Transform, Motion)> = Vec::with_capacity(s.num_links());
    let seg = |x: &Tensor, start: usize, len: usize| {
        x.slice_axis(0, Some(start as i64), Some((start + len) as i64), 1)
    };
    for (l, kind) in s.kinds.iter().enumerate() {
        // The joint's own transform and motion (Brax `jcalc`).
        let (j, jd) = match kind {
            LinkKind::Free { q_index, dof } => (
                Transform { pos: seg(q, *q_index, 3), rot: seg(q, q_index + 3, 4) },
                Motion { vel: seg(qd, *dof, 3), ang: seg(qd, dof + 3, 3) },
            ),
            LinkKind::OneDof(d) => {
                let (qi, qdi) = (q.index(d.q_index as i64), qd.index(d.dof as i64));
                let ang_axis = model.constant(&[3], &d.motion_ang);
                let vel_axis = model.constant(&[3], &d.motion_vel);
                (
                    Transform { pos: &vel_axis * &qi, rot: normalize(&quat_rot_axis(&ang_axis, &qi)) },
                    Motion { vel: &vel_axis * &qdi, ang: &ang_axis * &qdi },
                )
            }
            LinkKind::Slides(st) => {
                // Brax `jcalc` composes the slides one at a time; their rotations are the identity.
                let (mut pos, mut vel) = (model.constant(&[3], &[0.0; 3]), model.constant(&[3], &[0.0; 3]));
                for k in 0..st.count {
                    let axis = model.constant(&[3], &st.axes[k]);
                    pos = &pos + &(&axis * &q.index(st.q_index[k] as i64));
                    vel = &vel + &(&axis * &qd.index(st.dofs[k] as i64));
                }
                (
                    Transform { pos, rot: model.constant(&[4], &[1.0, 0.0, 0.0, 0.0]) },
                    Motion { vel, ang: model.constant(&[3], &[0.0; 3]) },
                )
            }
        };
        // Offset by the joint anchor, then place in the parent link's frame.
        let joint_pos = model.joint_pos.index(l as i64);
        let anchor = rotate(&joint_pos, &j.rot);
        let j = Transform { pos: &(&j.pos + &joint_pos) - &anchor, rot: j.rot };
        let link = Transform { pos: model.link_pos.index(l as i64), rot: model.link_rot.index(l as i64) };
        let j = link.compose(&j);
        frames.push(match s.parents[l] {
            None => {
                let ang = rotate(&jd.ang, &j.rot);
                (j, Motion { vel: jd.vel, ang })
            }
            Some(p) => {
                let (xp, xdp) = &frames[p];
                let x = xp.compose(&j);
                let vel = &(&xdp.vel + &cross(&xdp.ang, &(&x.pos - &xp.pos))) + &rotate(&jd.vel, &xp.rot);
                let ang = &xdp.ang + &rotate(&jd.ang, &x.rot);
                (x, Motion { vel, ang })
            }
        });
    }
    let stack = |f: &dyn Fn(&(Transform, Motion)) -> Tensor| {
        Tensor::stack(&frames.iter().map(f).collect::<Vec<_>>(), 0)
    };
    let x = Transform { pos: stack(&|f| f.0.pos.clone()), rot: normalize(&stack(&|f| f.0.rot.clone())) };
    let xd = Motion { vel: stack(&|f| f.1.vel.clone()), ang: stack(&|f| f.1.ang.clone()) };
    (x, xd)
}

/// Each link's parent frame and velocity (`[L, ...]`): the world (identity, at rest) for roots.
fn parents_of(model: &Model, x: &Transform, xd: &Motion) -> (Transform, Motion) {
    let s = &model.structure;
    let n = s.num_links();
    let idx: Vec<usize> = s.parents.iter().map(|p| p.unwrap_or(n)).collect();
    let zero = model.constant(&[1, 3], &[0.0; 3]);
    let identity = model.constant(&[1, 4], &[1.0, 0.0, 0.0, 0.0]);
    let with = |t: &Tensor, extra: &Tensor| {
        Tensor::concatenate(&[t.clone(), extra.clone()], 0).take(&index_tensor(&idx), 0)
    };
    (
        Transform { pos: with(&x.pos, &zero), rot: with(&x.rot, &identity) },
        Motion { vel: with(&xd.vel, &zero), ang: with(&xd.ang, &zero) },
    )
}

/// Brax `kinematics.world_to_joint`: from world frames `x` and velocities `xd` of the links, each
/// link's joint transform and motion relative to its parent anchor, and both anchor frames.
pub fn world_to_joint(model: &Model, x: &Transform, xd: &Motion) -> JointFrames {
    let (x_p, xd_p) = parents_of(model, x, xd);
    let link = Transform { pos: model.link_pos.clone(), rot: model.link_rot.clone() };
    // The joint frame has the link's orientation (Brax's joint rotation is the identity).
    let t = x_p.compose(&link);
    let a_p = Transform { pos: &t.pos + &rotate(&model.joint_pos, &t.rot), rot: t.rot };
    let a_c = Transform { pos: &x.pos + &rotate(&model.joint_pos, &x.rot), rot: x.rot.clone() };
    let inv_p = quat_inv(&a_p.rot);
    let j = Transform { pos: rotate(&(&a_c.pos - &a_p.pos), &inv_p), rot: quat_mul(&inv_p, &a_c.rot) };
    // Velocity of the parent body at the joint anchor.
    let at_anchor = xd_p.translate(&(&x_p.pos - &a_p.pos));
    let jd = Motion {
        vel: inv_rotate(&(&xd.vel - &at_anchor.vel), &a_p.rot),
        ang: inv_rotate(&(&xd.ang - &at_anchor.ang), &a_p.rot),
    };
    JointFrames { j, jd, a_p, a_c }
}

/// Brax `kinematics.inverse`: joint positions `q: [nq]` and velocities `qd: [nv]` from the joint
/// frames.
pub fn inverse(model: &Model, frames: &JointFrames) -> (Tensor, Tensor) {
    let s = &model.structure;
    let (j, jd) = (&frames.j, &frames.jd);
    let mut q_parts = Vec::new();
    let mut qd_parts = Vec::new();
    // Position in the concatenation of the parts, of each q (qd) entry.
    let mut q_at = vec![0usize; s.nq];
    let mut qd_at = vec![0usize; s.nv];
    let (mut q_len, mut qd_len) = (0, 0);

    let free: Vec<(usize, usize, usize)> = s
        .kinds
        .iter()
        .enumerate()
        .filter_map(|(l, k)| match k {
            LinkKind::Free { q_index, dof } => Some((l, *q_index, *dof)),
            LinkKind::OneDof(_) | LinkKind::Slides(_) => None,
        })
        .collect();
    if !free.is_empty() {
        let links: Vec<usize> = free.iter().map(|f| f.0).collect();
        let (pos, rot) = (take_rows(&j.pos, &links), take_rows(&j.rot, &links));
        let (vel, ang) = (take_rows(&jd.vel, &links), take_rows(&jd.ang, &links));
        q_parts.push(Tensor::concatenate(&[pos, rot.clone()], 1).reshape(&[-1]));
        qd_parts.push(Tensor::concatenate(&[vel, inv_rotate(&ang, &rot)], 1).reshape(&[-1]));
        for &(_, qi, di) in &free {
            (0..7).for_each(|k| q_at[qi + k] = q_len + k);
            (0..6).for_each(|k| qd_at[di + k] = qd_len + k);
            q_len += 7;
            qd_len += 6;
        }
    }

    let one = OneDofLinks::new(model);
    if !one.links.is_empty() {
        let (pos, rot) = (one.rows(&j.pos), one.rows(&j.rot));
        let (vel, ang) = (one.rows(&jd.vel), one.rows(&jd.ang));
        // Roots measure the angular velocity in the joint frame (Brax `x_dof`'s `j_rot`); for the
        // others the rotation is the identity, which Brax applies as an exact no-op.
        let is_root: Vec<bool> = one.links.iter().map(|&l| s.parents[l].is_none()).collect();
        let ang = if is_root.iter().any(|&r| r) {
            let mask = Tensor::from_vec(&[is_root.len(), 1], is_root);
            where_(&mask, &inv_rotate(&ang, &rot), &ang)
        } else {
            ang
        };
        let (axis, _, psi) = one.axis_angle(&rot);
        let angle_vel = dot(&axis, &ang).squeeze(-1);
        let slide = dot(&one.motion_vel, &pos).squeeze(-1);
        let slide_vel = dot(&one.motion_vel, &vel).squeeze(-1);
        q_parts.push(where_(&one.is_rot_mask, &psi, &slide));
        qd_parts.push(where_(&one.is_rot_mask, &angle_vel, &slide_vel));
        for (k, &dof) in one.dofs.iter().enumerate() {
            let LinkKind::OneDof(d) = s.kinds[one.links[k]] else { unreachable!("one-dof links") };
            q_at[d.q_index] = q_len + k;
            qd_at[dof] = qd_len + k;
        }
        q_len += one.links.len();
        qd_len += one.links.len();
    }
    // Slide stacks: Brax `axis_slide_vel`, each slide's coordinate and velocity along its axis.
    let slides = SlideLinks::new(model);
    if !slides.links.is_empty() {
        let (mut row_links, mut row_axes, mut rows) = (Vec::new(), Vec::new(), Vec::new());
        for (&l, st) in slides.links.iter().zip(&slides.stacks) {
            for k in 0..st.count {
                row_links.push(l);
                row_axes.extend(st.axes[k]);
                rows.push((st.q_index[k], st.dofs[k]));
            }
        }
        let axes = model.constant(&[row_links.len(), 3], &row_axes);
        q_parts.push(dot(&axes, &take_rows(&j.pos, &row_links)).squeeze(-1));
        qd_parts.push(dot(&axes, &take_rows(&jd.vel, &row_links)).squeeze(-1));
        for (k, &(qi, di)) in rows.iter().enumerate() {
            q_at[qi] = q_len + k;
            qd_at[di] = qd_len + k;
        }
    }
    let assemble = |parts: Vec<Tensor>, at: &[usize]| {
        let all =
            if parts.len() == 1 { parts.into_iter().next().unwrap() } else { Tensor::concatenate(&parts, 0) };
        take_rows(&all, at)
    };
    (assemble(q_parts, &q_at), assemble(qd_parts, &qd_at))
}
