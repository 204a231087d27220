//! Joints of the positional pipeline (Brax `positional/joints.py`): at the acceleration level a
//! joint only carries its actuator force and its damping; at the position level each 1-DoF joint's
//! anchor offset and axis misalignment (and any limit overshoot) are projected out in one pass, as
//! position-based-dynamics corrections shared between the parent and the child by their inverse
//! masses and inertias.
//!
//! Brax pads every joint to three DoFs (`_sphericalize`) and runs `_three_dof_joint_update` on all
//! of them; here the padding is written out for the link kinds kiln has: the two padded angular
//! DoFs of a hinge, and all three of a slide, are frozen by `[0, 0]` angle limits when the model
//! has any limited joint, and left free (`±inf`) otherwise, exactly as Brax pads them; a stack of
//! slides (Brax link type `2`/`3` without hinges) freezes all three angular DoFs the same way.
//! Free links get no correction (Brax multiplies theirs by zero).

use crate::rigid::kinematics::{
    JointFrames, OneDofLinks, SlideLinks, index_tensor, take_rows, world_to_joint,
};
use crate::rigid::model::{LinkKind, Model};
use crate::rigid::quat::{cross, dot, mat_vec, normalize, quat_rot_axis, rotate, signed_angle, vec_quat_mul};
use crate::rigid::spring::inv_inertia;
use crate::rigid::state::{Motion, Transform};
use kiln::prelude::*;

use super::{inv_mass, normalize_with_norm};

/// `[n, 3]` rows of `data` for the 1-DoF links, built from each joint's static description.
fn one_dof_rows(model: &Model, one: &OneDofLinks, f: &dyn Fn(&crate::rigid::OneDof) -> [f64; 3]) -> Tensor {
    let data: Vec<f64> = one
        .links
        .iter()
        .flat_map(|&l| match &model.structure.kinds[l] {
            LinkKind::OneDof(d) => f(d),
            LinkKind::Free { .. } | LinkKind::Slides(_) => unreachable!("OneDofLinks holds 1-DoF links only"),
        })
        .collect();
    model.constant(&[one.links.len(), 3], &data)
}

/// Per-link `[n, 3]` parts (for the 1-DoF links `links`) summed into `[L, 3]` rows at `ids`
/// (`-1`: dropped, for the world).
fn scatter(part: &Tensor, ids: &[i32], num_links: usize) -> Tensor {
    part.segment_sum(&Tensor::from_vec(&[ids.len()], ids.to_vec()), num_links)
}

/// Brax `positional.joints.acceleration_update`: the force (`vel`) and torque (`ang`) on each
/// link's centre of mass in the world frame (`[L, 3]` each), given the joint frames, the centres of
/// mass `x_i` and the joint forces `tau: [nv]`: the actuator force along (or torque about) the
/// joint axis minus `constraint_vel_damping · jd.vel` and `constraint_ang_damping · jd.ang`, on the
/// child, and the opposite wrench on the parent.
pub(crate) fn acceleration_update(
    model: &Model,
    frames: &JointFrames,
    x_i: &Transform,
    tau: &Tensor,
) -> Motion {
    let s = &model.structure;
    let num_links = s.num_links();
    let one = OneDofLinks::new(model);
    let stacks = SlideLinks::new(model);
    // Brax `_damp` per kind of link: `Σ τ·motion − damping·jd`, and the links it belongs to.
    let mut parts: Vec<(Tensor, Tensor)> = Vec::new();
    let mut links: Vec<usize> = Vec::new();
    if !one.links.is_empty() {
        let tau = tau.take(&index_tensor(&one.dofs), 0).expand_dims(-1);
        let per_link = |t: &Tensor| one.rows(t).expand_dims(-1);
        let motion_ang = one_dof_rows(model, &one, &|d| d.motion_ang);
        let ang =
            &(&tau * &motion_ang) - &(&per_link(&model.constraint_ang_damping) * &one.rows(&frames.jd.ang));
        let vel = &(&tau * &one.motion_vel)
            - &(&per_link(&model.constraint_vel_damping) * &one.rows(&frames.jd.vel));
        parts.push((vel, ang));
        links.extend(&one.links);
    }
    if !stacks.links.is_empty() {
        // Slides have no angular motion: the torque is the damping alone.
        let per_link = |t: &Tensor| stacks.rows(t).expand_dims(-1);
        let ang = &(&per_link(&model.constraint_ang_damping) * &stacks.rows(&frames.jd.ang)) * -1.0;
        let vel = &stacks.along_axes(tau)
            - &(&per_link(&model.constraint_vel_damping) * &stacks.rows(&frames.jd.vel));
        parts.push((vel, ang));
        links.extend(&stacks.links);
    }
    let (vel, ang) = match parts.len() {
        0 => {
            let zero = model.constant(&[num_links, 3], &vec![0.0; num_links * 3]);
            return Motion { vel: zero.clone(), ang: zero };
        }
        1 => parts.pop().expect("one part"),
        _ => {
            let (vels, angs): (Vec<Tensor>, Vec<Tensor>) = parts.into_iter().unzip();
            (Tensor::concatenate(&vels, 0), Tensor::concatenate(&angs, 0))
        }
    };
    let rows = |t: &Tensor| take_rows(t, &links);
    // Joint frame → world, then the wrench at the child's centre of mass and the opposite one at
    // the parent's (Brax `Transform.do(Force)`: torque += offset × force).
    let a_p_rot = rows(&frames.a_p.rot);
    let vel = rotate(&vel, &a_p_rot);
    let ang = rotate(&ang, &a_p_rot);
    let child_ang = &ang + &cross(&(&rows(&frames.a_c.pos) - &rows(&x_i.pos)), &vel);
    let parents: Vec<usize> = links.iter().map(|&l| s.parents[l].unwrap_or(0)).collect();
    let parent_com = x_i.pos.take(&index_tensor(&parents), 0);
    let parent_ang = &ang + &cross(&(&rows(&frames.a_p.pos) - &parent_com), &vel);
    let child_ids: Vec<i32> = links.iter().map(|&l| l as i32).collect();
    let parent_ids: Vec<i32> = links.iter().map(|&l| s.parents[l].map_or(-1, |p| p as i32)).collect();
    Motion {
        vel: &scatter(&vel, &child_ids, num_links) - &scatter(&vel, &parent_ids, num_links),
        ang: &scatter(&child_ang, &child_ids, num_links) - &scatter(&parent_ang, &parent_ids, num_links),
    }
}

/// Brax `_three_dof_joint_update` for the 1-DoF links: the position error `dx` and the rotation
/// error `dq` (a rotation vector) of each joint, in the parent anchor's frame, from the joint
/// transform `j` (`[n, 3]`, `[n, 4]`). Each of the three angular DoFs rotates a reference axis by
/// its angle clipped to the DoF's limits and measures what is left (`n₁' × n₂`); a slide's
/// coordinate past its limits adds to `dx`.
fn joint_errors(model: &Model, one: &OneDofLinks, j_pos: &Tensor, j_rot: &Tensor) -> (Tensor, Tensor) {
    let s = &model.structure;
    let n = one.links.len();

    // Angle limits of the padded DoFs: the joint's own range for a hinge's axis; [0, 0] (frozen)
    // for a slide's axis and for the padding, which is ±inf when no joint of the model is limited.
    let dofs = index_tensor(&one.dofs);
    let (lo, hi) = (model.limit_lo.take(&dofs, 0), model.limit_hi.take(&dofs, 0));
    let trans_mask =
        Tensor::from_vec(&[n], one.links.iter().map(|&l| is_slide(model, l)).collect::<Vec<_>>());
    let zeros = model.constant(&[n], &vec![0.0; n]);
    let pad = if s.any_limited { 0.0 } else { f64::INFINITY };
    let (pad_lo, pad_hi) = (model.constant(&[n], &vec![-pad; n]), model.constant(&[n], &vec![pad; n]));
    let ang_limits = [
        (where_(&trans_mask, &zeros, &lo), where_(&trans_mask, &zeros, &hi)),
        (pad_lo.clone(), pad_hi.clone()),
        (pad_lo, pad_hi),
    ];
    let dq = angular_error(&one.frame_ang, j_rot, &ang_limits);

    // Pull the anchors together, except along a slide's world-axis components (Brax masks the
    // components where the slide axis is nonzero); push a slide back inside its range.
    let free_components =
        one_dof_rows(model, one, &|d| d.motion_vel.map(|v| if v != 0.0 { 0.0 } else { 1.0 }));
    let slide = dot(&one.motion_vel, j_pos);
    let (lo, hi) = (lo.expand_dims(-1), hi.expand_dims(-1));
    let overshoot = &slide - &slide.maximum(&lo).minimum(&hi);
    let dx_limit = &(&one.motion_vel * &overshoot) * &one.is_trans;
    let dx = &(&(-j_pos) * &free_components) - &dx_limit;
    (dx, dq)
}

/// The angular part of Brax `_three_dof_joint_update`: the rotation error `dq` (`[n, 3]`) of joints
/// with angular frame rows `frame` (`[n, 3]` each) and joint rotation `j_rot: [n, 4]`. Each of the
/// three angular DoFs rotates a reference axis by its angle clipped to `limits[k]` (`[n]` each)
/// and measures what is left (`n₁' × n₂`).
fn angular_error(frame: &[Tensor; 3], j_rot: &Tensor, limits: &[(Tensor, Tensor); 3]) -> Tensor {
    let [a0, a1, a2] = frame;
    let child: Vec<Tensor> = [a0, a1, a2].iter().map(|a| rotate(a, j_rot)).collect();
    let line_of_nodes = normalize(&cross(&child[2], a0));
    let axis_1_in_xz = normalize(&(&(&dot(a0, &child[0]) * &child[0]) + &(&dot(a0, &child[1]) * &child[1])));
    let axis_2_normal = normalize(&cross(&axis_1_in_xz, a0));
    let limit_axes = [a0.clone(), &(-&axis_2_normal) * &dot(a0, &child[2]).sign(), child[2].clone()];
    let ref_1 = [a1.clone(), a0.clone(), line_of_nodes.clone()];
    let ref_2 = [line_of_nodes, axis_1_in_xz, child[1].clone()];
    let mut dq: Option<Tensor> = None;
    for k in 0..3 {
        let angle = signed_angle(&limit_axes[k], &ref_1[k], &ref_2[k]);
        let angle = angle.maximum(&limits[k].0).minimum(&limits[k].1);
        let fix = quat_rot_axis(&limit_axes[k], &angle);
        let dq_k = cross(&rotate(&ref_1[k], &fix), &ref_2[k]);
        dq = Some(match dq {
            None => dq_k,
            Some(sum) => &sum + &dq_k,
        });
    }
    &dq.expect("three angular DoFs") * -1.0
}

/// Brax `_three_dof_joint_update` for the slide stacks (`n` links): position error `dx` and
/// rotation error `dq` (`[n, 3]` each) from the joint transform `j` (`[n, 3]`, `[n, 4]`). Without
/// hinges the joint frame is the identity and every angular DoF on a slide is frozen at `[0, 0]`;
/// Brax's padding row of a two-slide stack is `[0, 0]` too when the model has limits, else free.
/// The anchors are pulled together except along the components the slide axes span, and each
/// slide's coordinate past its range is pushed back.
fn stack_errors(model: &Model, st: &SlideLinks, j_pos: &Tensor, j_rot: &Tensor) -> (Tensor, Tensor) {
    let n = st.links.len();
    let eye = |k: usize| {
        let mut row = [0.0; 3];
        row[k] = 1.0;
        model.constant(&[n, 3], &row.repeat(n))
    };
    let pad = if model.structure.any_limited { 0.0 } else { f64::INFINITY };
    let limit = |k: usize, sign: f64| {
        let data: Vec<f64> = st.stacks.iter().map(|s| if k < s.count { 0.0 } else { sign * pad }).collect();
        model.constant(&[n], &data)
    };
    let limits = [0, 1, 2].map(|k| (limit(k, -1.0), limit(k, 1.0)));
    let dq = angular_error(&[eye(0), eye(1), eye(2)], j_rot, &limits);

    let free: Vec<f64> = st
        .stacks
        .iter()
        .flat_map(|s| [0, 1, 2].map(|c| if s.axes.iter().any(|a| a[c] != 0.0) { 0.0 } else { 1.0 }))
        .collect();
    let mut dx = &(-j_pos) * &model.constant(&[n, 3], &free);
    for (k, xp) in st.coords(j_pos).iter().enumerate() {
        let dofs = index_tensor(&st.dofs[k]);
        let lo = model.limit_lo.take(&dofs, 0).expand_dims(-1);
        let hi = model.limit_hi.take(&dofs, 0).expand_dims(-1);
        let overshoot = xp - &xp.maximum(&lo).minimum(&hi);
        dx = &dx - &(&st.axes[k] * &overshoot);
    }
    (dx, dq)
}

/// True for a slide link.
fn is_slide(model: &Model, link: usize) -> bool {
    match &model.structure.kinds[link] {
        LinkKind::OneDof(d) => d.is_translational(),
        LinkKind::Free { .. } | LinkKind::Slides(_) => false,
    }
}

/// One side of a joint for the position corrections (`[n, ...]`): the anchor's offset from the
/// centre of mass, the centre of mass's orientation, the inverse inertia (world axes) and inverse
/// mass (`[n, 1]`); zero inverses for the world.
struct Side {
    offset: Tensor,
    rot: Tensor,
    i_inv: Tensor,
    m_inv: Tensor,
}

/// A position correction of one body: `Δpos: [n, 3]` and `Δrot: [n, 4]` (added to the quaternion).
struct Correction {
    pos: Tensor,
    rot: Tensor,
}

/// `I⁻¹` weighted squared lever `(r × n)ᵀ I⁻¹ (r × n)` plus the inverse mass: the generalized
/// inverse mass of a body at offset `r` along `n` (Brax's `w1`, `w2`).
fn weight(side: &Side, n: &Tensor) -> Tensor {
    let cr = cross(&side.offset, n);
    &side.m_inv + &dot(&cr, &mat_vec(&side.i_inv, &cr))
}

/// Brax `_translation_update`: close the position error `dx` (`[n, 3]`) between the parent's and
/// the child's anchors. Returns the (parent, child) corrections.
fn translation(parent: &Side, child: &Side, dx: &Tensor) -> (Correction, Correction) {
    let (n, c) = normalize_with_norm(dx);
    let dlambda = &(-&c) / &(&(&weight(parent, &n) + &weight(child, &n)) + 1e-6);
    let p = &dlambda * &n;
    let turn = |side: &Side| vec_quat_mul(&mat_vec(&side.i_inv, &cross(&side.offset, &p)), &side.rot);
    (
        Correction { pos: &(-&p) * &parent.m_inv, rot: &turn(parent) * -0.5 },
        Correction { pos: &p * &child.m_inv, rot: &turn(child) * 0.5 },
    )
}

/// Brax `_rotation_update`: close the rotation error `dq` (a rotation vector, `[n, 3]`) between
/// the parent and the child. Returns the (parent, child) quaternion corrections.
fn rotation(parent: &Side, child: &Side, dq: &Tensor) -> (Tensor, Tensor) {
    let (n, th) = normalize_with_norm(dq);
    let w = |side: &Side| dot(&n, &mat_vec(&side.i_inv, &n));
    let dlambda = &(-&th) / &(&(&w(parent) + &w(child)) + 1e-6);
    let p = &(-&dlambda) * &n;
    let turn = |side: &Side| vec_quat_mul(&mat_vec(&side.i_inv, &p), &side.rot);
    (&turn(parent) * -0.5, &turn(child) * 0.5)
}

/// Brax `positional.joints.position_update`: the centre-of-mass frames `x_i` (`[L, ...]`) after
/// one pass of joint corrections, given the link frames `x`, `xd` they come from. Errors are
/// measured in each joint's parent-anchor frame, turned to the world, and split between parent
/// and child; `joint_scale_pos` and `joint_scale_ang` scale the translational and rotational
/// parts. Orientations are left unnormalized, as in Brax.
pub(crate) fn position_update(model: &Model, x: &Transform, xd: &Motion, x_i: &Transform) -> Transform {
    let s = &model.structure;
    let num_links = s.num_links();
    let one = OneDofLinks::new(model);
    let stacks = SlideLinks::new(model);
    if one.links.is_empty() && stacks.links.is_empty() {
        return x_i.clone();
    }
    let frames = world_to_joint(model, x, xd);
    // Errors per kind of link, then concatenated in the order of `links`.
    let mut errors: Vec<(Tensor, Tensor)> = Vec::new();
    let mut links: Vec<usize> = Vec::new();
    if !one.links.is_empty() {
        errors.push(joint_errors(model, &one, &one.rows(&frames.j.pos), &one.rows(&frames.j.rot)));
        links.extend(&one.links);
    }
    if !stacks.links.is_empty() {
        errors.push(stack_errors(model, &stacks, &stacks.rows(&frames.j.pos), &stacks.rows(&frames.j.rot)));
        links.extend(&stacks.links);
    }
    let (dx, dq) = if errors.len() == 1 {
        errors.pop().expect("one kind")
    } else {
        let (dxs, dqs): (Vec<Tensor>, Vec<Tensor>) = errors.into_iter().unzip();
        (Tensor::concatenate(&dxs, 0), Tensor::concatenate(&dqs, 0))
    };
    let rows = |t: &Tensor| take_rows(t, &links);
    let a_p_rot = rows(&frames.a_p.rot);
    let (dx, dq) = (rotate(&dx, &a_p_rot), rotate(&dq, &a_p_rot));

    // Parents of roots are the world: a zero inverse mass and inertia, at the origin.
    let i_inv = inv_inertia(model, &x.rot);
    let m_inv = inv_mass(model);
    let parents: Vec<usize> = links.iter().map(|&l| s.parents[l].unwrap_or(num_links)).collect();
    let with_world = |t: &Tensor, world: &[f64], shape: &[usize]| {
        Tensor::concatenate(&[t.clone(), model.constant(shape, world)], 0).take(&index_tensor(&parents), 0)
    };
    let xi_p_pos = with_world(&x_i.pos, &[0.0; 3], &[1, 3]);
    let parent = Side {
        offset: &rows(&frames.a_p.pos) - &xi_p_pos,
        rot: with_world(&x_i.rot, &[1.0, 0.0, 0.0, 0.0], &[1, 4]),
        i_inv: with_world(&i_inv, &[0.0; 9], &[1, 3, 3]),
        m_inv: with_world(&m_inv, &[0.0], &[1]).expand_dims(-1),
    };
    let child = Side {
        offset: &rows(&frames.a_c.pos) - &rows(&x_i.pos),
        rot: rows(&x_i.rot),
        i_inv: rows(&i_inv),
        m_inv: rows(&m_inv).expand_dims(-1),
    };
    let (tp, tc) = translation(&parent, &child, &(-&dx));
    let (rp, rc) = rotation(&parent, &child, &dq);
    let (sp, sa) = (&model.joint_scale_pos, &model.joint_scale_ang);
    let child_ids: Vec<i32> = links.iter().map(|&l| l as i32).collect();
    let parent_ids: Vec<i32> = links.iter().map(|&l| s.parents[l].map_or(-1, |p| p as i32)).collect();
    let pos_c = scatter(&(&tc.pos * sp), &child_ids, num_links);
    let rot_c = scatter(&(&(&tc.rot * sp) + &(&rc * sa)), &child_ids, num_links);
    let pos_p = scatter(&(&tp.pos * sp), &parent_ids, num_links);
    let rot_p = scatter(&(&(&tp.rot * sp) + &(&rp * sa)), &parent_ids, num_links);
    Transform { pos: &(&x_i.pos + &pos_c) + &pos_p, rot: &(&x_i.rot + &rot_c) + &rot_p }
}
