//! Joint forces of the spring pipeline (Brax `spring/joints.py`): each joint is a stiff spring and
//! damper between the parent's and the child's anchor, evaluated in the joint frame, plus the
//! actuator force along the joint and a spring pushing back past a limit (1-DoF links, and stacks of
//! slides: Brax link types `2`/`3` without hinges); the same wrench acts, with
//! opposite sign, on the parent's centre of mass.

use crate::rigid::kinematics::{JointFrames, OneDofLinks, SlideLinks, index_tensor};
use crate::rigid::model::Model;
use crate::rigid::quat::{cross, dot, rotate};
use crate::rigid::state::{Motion, Transform};
use kiln::prelude::*;

/// Brax `joints._one_dof`: the force (`vel`, N) and torque (`ang`, N·m) in the joint frame of every
/// 1-DoF link (`[n, 3]` each), given its joint force `tau: [n, 1]`.
fn one_dof(model: &Model, one: &OneDofLinks, frames: &JointFrames, tau: &Tensor) -> Motion {
    let per_link = |t: &Tensor| one.rows(t).expand_dims(-1);
    let stiffness = per_link(&model.constraint_stiffness);
    let vel_damping = per_link(&model.constraint_vel_damping);
    let ang_damping = per_link(&model.constraint_ang_damping);
    let (j_pos, j_rot) = (one.rows(&frames.j.pos), one.rows(&frames.j.rot));
    let (jd_vel, jd_ang) = (one.rows(&frames.jd.vel), one.rows(&frames.jd.ang));
    let (v0, a0, a1) = (&one.frame_vel0, &one.frame_ang[0], &one.frame_ang[1]);
    let (is_trans, is_rot) = (&one.is_trans, &one.is_rot);

    // Pull the anchors together; a slide is free along its axis.
    let vel = &(-&j_pos) * &stiffness;
    let vel = &vel - &(&(&dot(v0, &vel) * v0) * is_trans);
    let vel = &vel + &(&(tau * v0) * is_trans);
    let damp = &(-&jd_vel) * &vel_damping;
    let vel = &vel + &(&damp - &(&(&dot(v0, &damp) * v0) * is_trans));

    // Align the joint axis; a slide also locks the rotation about it.
    let (axis_c_x, axis_c_y, psi) = one.axis_angle(&j_rot);
    let ang = &(&stiffness * -1.0) * &cross(a0, &axis_c_x);
    let ang = &ang - &(&(&(&stiffness * &cross(a1, &axis_c_y)) * is_trans) * &(1.0 - is_rot));
    let ang = &ang + &(&(tau * a0) * is_rot);
    let ang = &ang - &(&ang_damping * &jd_ang);

    if !model.structure.any_limited {
        return Motion { vel, ang };
    }
    // Push back past a limit: the hinge angle psi, or the slide offset along the axis.
    let limit_stiffness = per_link(&model.constraint_limit_stiffness);
    let dofs = index_tensor(&one.dofs);
    let (lo, hi) =
        (model.limit_lo.take(&dofs, 0).expand_dims(-1), model.limit_hi.take(&dofs, 0).expand_dims(-1));
    let overshoot = |x: &Tensor| {
        let zero = x.zeros_like();
        let below = where_(&x.lt(&lo), &(x - &lo), &zero);
        where_(&x.gt(&hi), &(x - &hi), &below)
    };
    let dang = overshoot(&psi.expand_dims(-1));
    let ang = &ang - &(&(&(&limit_stiffness * a0) * &dang) * &(1.0 - is_trans));
    let dvel = overshoot(&dot(&j_pos, v0));
    let vel = &vel - &(&(&(&limit_stiffness * v0) * &dvel) * is_trans);
    Motion { vel, ang }
}

/// Brax `joints._two_dof` and `_three_dof` for links whose DoFs are all slides (`n` links,
/// `[n, 3]` each), given the joint forces `tau: [nv]`. With no rotational DoF Brax's joint frame
/// is the identity, and what is left of its formulas is:
/// - force: `−k·j.pos − c_v·jd.vel` minus its components along the slide axes, plus `Σ axisₖ τₖ`,
///   minus `k_lim · Σ axisₖ · overshootₖ` past a slide's limits (when the model has limits);
/// - torque: `−c_a·jd.ang`; for two slides also `−k_lim (e₁ × R e₁) − k (e₂ × R e₂)` with `R` the
///   joint rotation, locking the rotation (Brax uses `constraint_limit_stiffness` for the first
///   term; kept as is). Three slides get no aligning torque (Brax multiplies it by
///   `is_rotational = 0`).
fn slides(model: &Model, st: &SlideLinks, frames: &JointFrames, tau: &Tensor) -> Motion {
    let per_link = |t: &Tensor| st.rows(t).expand_dims(-1);
    let stiffness = per_link(&model.constraint_stiffness);
    let limit_stiffness = per_link(&model.constraint_limit_stiffness);
    let (j_pos, j_rot) = (st.rows(&frames.j.pos), st.rows(&frames.j.rot));
    let (jd_vel, jd_ang) = (st.rows(&frames.jd.vel), st.rows(&frames.jd.ang));

    let vel = &(&(-&j_pos) * &stiffness) - &(&jd_vel * &per_link(&model.constraint_vel_damping));
    let along: Vec<Tensor> = st.coords(&vel);
    let mut vel = vel;
    for (k, c) in along.iter().enumerate() {
        vel = &vel - &(c * &st.axes[k]);
    }
    let vel = &vel + &st.along_axes(tau);

    let n = st.links.len();
    let e = |k: usize| {
        let mut row = [0.0; 3];
        row[k] = 1.0;
        model.constant(&[n, 3], &row.repeat(n))
    };
    let (e1, e2) = (e(1), e(2));
    let lock = &(&(&limit_stiffness * &cross(&e1, &rotate(&e1, &j_rot))) * -1.0)
        - &(&stiffness * &cross(&e2, &rotate(&e2, &j_rot)));
    let ang = &(&lock * &st.is_two) - &(&per_link(&model.constraint_ang_damping) * &jd_ang);

    if !model.structure.any_limited {
        return Motion { vel, ang };
    }
    let xp = st.coords(&j_pos);
    let mut vel = vel;
    for (k, x) in xp.iter().enumerate() {
        let dofs = index_tensor(&st.dofs[k]);
        let lo = model.limit_lo.take(&dofs, 0).expand_dims(-1);
        let hi = model.limit_hi.take(&dofs, 0).expand_dims(-1);
        let zero = x.zeros_like();
        let below = where_(&x.lt(&lo), &(x - &lo), &zero);
        let dvel = where_(&x.gt(&hi), &(x - &hi), &below);
        vel = &vel - &(&(&limit_stiffness * &st.axes[k]) * &dvel);
    }
    Motion { vel, ang }
}

/// Rows of `part` (`[n, 3]`, for the links `links`) spread to `[L, 3]`, zeros elsewhere.
fn spread(part: &Tensor, links: &[usize], num_links: usize) -> Tensor {
    if links.len() == num_links && links.iter().enumerate().all(|(i, &l)| i == l) {
        return part.clone();
    }
    let n = links.len();
    let mut at = vec![n; num_links];
    for (k, &l) in links.iter().enumerate() {
        at[l] = k;
    }
    let padded = Tensor::concatenate(&[part.clone(), part.index_axis(0, 0).zeros_like().expand_dims(0)], 0);
    padded.take(&index_tensor(&at), 0)
}

/// Brax `spring.joints.resolve`: the force (`vel`) and torque (`ang`) on each link's centre of mass
/// in the world frame (`[L, 3]` each) from every joint, given the joint frames, the centres of mass
/// `x_i` and the joint forces `tau: [nv]`. Free joints exert nothing.
pub(crate) fn resolve(model: &Model, frames: &JointFrames, x_i: &Transform, tau: &Tensor) -> Motion {
    let s = &model.structure;
    let num_links = s.num_links();
    let one = OneDofLinks::new(model);
    let stacks = SlideLinks::new(model);
    let zero = || model.constant(&[num_links, 3], &vec![0.0; num_links * 3]);
    // Joint-frame wrenches of each kind of link, and the links they belong to (free: none).
    let mut parts: Vec<(Motion, &[usize])> = Vec::new();
    if !one.links.is_empty() {
        let tau = tau.take(&index_tensor(&one.dofs), 0).expand_dims(-1);
        parts.push((one_dof(model, &one, frames, &tau), &one.links));
    }
    if !stacks.links.is_empty() {
        parts.push((slides(model, &stacks, frames, tau), &stacks.links));
    }
    let (jf, links): (Motion, Vec<usize>) = match &parts[..] {
        [] => return Motion { vel: zero(), ang: zero() },
        [(m, links)] => (m.clone(), links.to_vec()),
        _ => {
            let cat = |f: &dyn Fn(&Motion) -> Tensor| {
                Tensor::concatenate(&parts.iter().map(|(m, _)| f(m)).collect::<Vec<_>>(), 0)
            };
            let links = parts.iter().flat_map(|(_, l)| l.iter().copied()).collect();
            (Motion { vel: cat(&|m| m.vel.clone()), ang: cat(&|m| m.ang.clone()) }, links)
        }
    };
    let (jf_vel, jf_ang) = (spread(&jf.vel, &links, num_links), spread(&jf.ang, &links, num_links));
    // Joint frame → world, then a wrench at the child's centre of mass and the opposite one at the
    // parent's.
    let vel = rotate(&jf_vel, &frames.a_p.rot);
    let ang = rotate(&jf_ang, &frames.a_p.rot);
    let child_ang = &ang + &cross(&(&frames.a_c.pos - &x_i.pos), &vel);
    let parent_ids: Vec<i32> = s.parents.iter().map(|p| p.map_or(-1, |p| p as i32)).collect();
    let safe_parent: Vec<usize> = s.parents.iter().map(|p| p.unwrap_or(0)).collect();
    let parent_com = x_i.pos.take(&index_tensor(&safe_parent), 0);
    let parent_ang = &ang + &cross(&(&frames.a_p.pos - &parent_com), &vel);
    let ids = Tensor::from_vec(&[num_links], parent_ids);
    Motion {
        vel: &vel - &vel.segment_sum(&ids, num_links),
        ang: &child_ang - &parent_ang.segment_sum(&ids, num_links),
    }
}
