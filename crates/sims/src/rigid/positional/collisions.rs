//! Contacts of the positional pipeline (Brax `positional/collisions.py`, after sections 3.5 and 3.6
//! of Müller et al., "Detailed rigid body simulation with extended position based dynamics", 2020,
//! without compliance): a position pass that pushes penetrating bodies apart along the normal and
//! cancels their tangential slip when static friction holds, then a velocity pass that applies
//! dynamic friction and restitution, averaged over each link's penetrating rows. The contact rows
//! (plane–sphere, plane–capsule) are the spring pipeline's, computed once per step after the joint
//! pass, as Brax does. As in Brax, no smoothing of the contact onset by default.
//!
//! **Optional smooth onset** ([`Structure::contact_smoothing`] `= Some(w)`, metres; for gradient
//! work, not in Brax). The penetration depth `max(−dist, 0)` the position pass removes becomes
//! `w · softplus(−dist / w)` (always ≥ 0, so a row never pulls a body towards the plane), and the
//! gate `dist < 0` of static friction and of the velocity pass becomes the weight `σ(−dist / w)`;
//! each link's velocity changes are averaged over `max(Σ weights, 1)` instead of the count of
//! penetrating rows. As `w → 0` the result tends to the hard gate's; `None` (the default) is
//! Brax's formulation, bit for bit.
//!
//! Unlike the spring pipeline, Brax's positional contacts read each body's full inverse inertia
//! (`take(link_idx, axis=0)`), so there is no flattened-index quirk here.
//!
//! [`Structure::contact_smoothing`]: crate::rigid::Structure::contact_smoothing

use crate::rigid::kinematics::index_tensor;
use crate::rigid::model::Model;
use crate::rigid::quat::{cross, dot, inv_rotate, mat_vec, normalize, rotate, safe_norm, vec_quat_mul};
use crate::rigid::spring::collisions::{Contacts, contacts};
use crate::rigid::spring::inv_inertia;
use crate::rigid::state::{Motion, Transform};
use kiln::prelude::*;

use super::{inv_mass, normalize_with_norm};

/// The contact rows at one set of link frames, with the two bodies of each row.
pub(crate) struct Rows {
    c: Contacts,
    /// `i32[2R]`: the plane's link for every row, then the other geom's (`-1`: the world).
    ids: Vec<i32>,
}

/// One body of each row (`[R, ...]`): the world reads as the origin with zero inverses.
struct Body {
    pos: Tensor,
    rot: Tensor,
    i_inv: Tensor,
    m_inv: Tensor,
}

impl Rows {
    /// The contact rows at link frames `x` (Brax `contact.get`); `None` for a model without any.
    pub(crate) fn new(model: &Model, x: &Transform) -> Option<Rows> {
        let rows = &model.structure.contacts;
        if rows.is_empty() {
            return None;
        }
        let side = |l: Option<usize>| l.map_or(-1, |l| l as i32);
        let ids = rows.iter().map(|r| side(r.link1)).chain(rows.iter().map(|r| side(r.link2))).collect();
        Some(Rows { c: contacts(model, x), ids })
    }

    fn len(&self) -> usize {
        self.ids.len() / 2
    }

    /// Row `k`'s links (0: the plane's, 1: the other's), with the world at index `L`.
    fn links(&self, k: usize, num_links: usize) -> Tensor {
        let r = self.len();
        let ids: Vec<usize> = self.ids[k * r..(k + 1) * r]
            .iter()
            .map(|&i| if i < 0 { num_links } else { i as usize })
            .collect();
        index_tensor(&ids)
    }

    /// Per-link sums `[L, ...]` of per-row values for body 0 (`rows0`) and body 1 (`rows1`).
    fn sum_to_links(&self, rows0: &Tensor, rows1: &Tensor, num_links: usize) -> Tensor {
        let ids = Tensor::from_vec(&[self.ids.len()], self.ids.clone());
        Tensor::concatenate(&[rows0.clone(), rows1.clone()], 0).segment_sum(&ids, num_links)
    }
}

/// Rows of `t: [L, ...]` at `links`, with `world` (shape `[1, ...]`) for the world.
fn gather(t: &Tensor, world: &Tensor, links: &Tensor) -> Tensor {
    Tensor::concatenate(&[t.clone(), world.clone()], 0).take(links, 0)
}

/// Both bodies of every row at centre-of-mass frames `x_i`, with inverse inertias `i_inv` and
/// inverse masses `m_inv`.
fn bodies(model: &Model, rows: &Rows, x_i: &Transform, i_inv: &Tensor, m_inv: &Tensor) -> [Body; 2] {
    let n = model.structure.num_links();
    [0, 1].map(|k| {
        let links = rows.links(k, n);
        Body {
            pos: gather(&x_i.pos, &model.constant(&[1, 3], &[0.0; 3]), &links),
            rot: gather(&x_i.rot, &model.constant(&[1, 4], &[1.0, 0.0, 0.0, 0.0]), &links),
            i_inv: gather(i_inv, &model.constant(&[1, 3, 3], &[0.0; 9]), &links),
            m_inv: gather(m_inv, &model.constant(&[1], &[0.0]), &links).expand_dims(-1),
        }
    })
}

/// Generalized inverse mass of `body` at offset `r` along `n` (Brax's `w1`, `w2`).
fn weight(body: &Body, r: &Tensor, n: &Tensor) -> Tensor {
    let cr = cross(r, n);
    &body.m_inv + &dot(&cr, &mat_vec(&body.i_inv, &cr))
}

/// `Ĩ⁻¹ (r × p)` turned into a quaternion increment of `body`: `(0, ·) ⊗ rot`.
fn turn(body: &Body, r: &Tensor, p: &Tensor) -> Tensor {
    vec_quat_mul(&mat_vec(&body.i_inv, &cross(r, p)), &body.rot)
}

/// `NaN` entries replaced by 0 (Brax `where(isnan(x), 0, x)`).
fn zero_nan(x: &Tensor) -> Tensor {
    where_(&x.ne(x), &x.zeros_like(), x)
}

/// Brax `positional.collisions.resolve_position`: the centre-of-mass frames `x_i` after one pass
/// of contact projection, and each row's normal multiplier `dlambda: [R, 1]` (0 where the row does
/// not penetrate). `x` are the link frames the rows were computed at, `x_i_prev` the centre-of-mass
/// frames at the start of the step (for static friction). Orientations are renormalized.
pub(crate) fn resolve_position(
    model: &Model,
    rows: &Rows,
    x: &Transform,
    x_i: &Transform,
    x_i_prev: &Transform,
) -> (Transform, Tensor) {
    let num_links = model.structure.num_links();
    let c = &rows.c;
    let [b0, b1] = bodies(model, rows, x_i, &inv_inertia(model, &x.rot), &inv_mass(model));
    let prev = |k: usize| {
        let links = rows.links(k, num_links);
        (
            gather(&x_i_prev.pos, &model.constant(&[1, 3], &[0.0; 3]), &links),
            gather(&x_i_prev.rot, &model.constant(&[1, 4], &[1.0, 0.0, 0.0, 0.0]), &links),
        )
    };
    let n = -&c.normal;
    let dist = c.dist.expand_dims(-1);

    // Normal: push the bodies apart by the penetration depth.
    let half = &(&n * &dist) / 2.0;
    let r0 = &(&c.pos + &half) - &b0.pos;
    let r1 = &(&c.pos - &half) - &b1.pos;
    let w_n = &(&weight(&b0, &r0, &n) + &weight(&b1, &r1, &n)) + 1e-6;
    // The depth removed and the gate of static friction: Brax's hard `dist < 0`, or the smooth
    // onset (module docs). `dlambda · colliding` is the row's normal multiplier either way.
    let (dlambda, colliding) = match model.structure.contact_smoothing {
        None => (&(-&dist) / &w_n, dist.lt(&dist.zeros_like()).astype(model.dtype())),
        Some(width) => {
            let depth = &kiln::nn::softplus(&(&(-&dist) / width)) * width;
            (&depth / &w_n, (&(-&dist) / width).sigmoid())
        }
    };
    let smooth = model.structure.contact_smoothing.is_some();
    let p = if smooth { &dlambda * &n } else { &(&dlambda * &n) * &colliding };
    let mut pos0 = &p * &b0.m_inv;
    let mut pos1 = &(-&p) * &b1.m_inv;
    let mut rot0 = turn(&b0, &r0, &p);
    let mut rot1 = -&turn(&b1, &r1, &p);

    // Static friction: undo the tangential slip of the contact point since the step began, when
    // that takes less than the normal multiplier.
    let (prev0, prev1) = (prev(0), prev(1));
    let carried = |b: &Body, prev: &(Tensor, Tensor)| {
        let local = inv_rotate(&(&c.pos - &b.pos), &b.rot);
        &prev.0 + &rotate(&local, &prev.1)
    };
    let (p1bar, p2bar) = (carried(&b0, &prev0), carried(&b1, &prev1));
    let slip = &(&c.pos - &p1bar) - &(&c.pos - &p2bar);
    let slip_t = &slip - &(&dot(&slip, &n) * &n);
    let (r0, r1) = (&c.pos - &b0.pos, &c.pos - &b1.pos);
    let c_t = safe_norm(&slip_t);
    let n_t = &slip_t / &(&c_t + 1e-6);
    let dlambda_t = &(-&c_t) / &(&weight(&b0, &r0, &n_t) + &weight(&b1, &r1, &n_t));
    let holds = dlambda_t.abs().lt(&dlambda.abs()).astype(model.dtype());
    let p = &(&(&dlambda_t * &n_t) * &holds) * &colliding;
    pos0 = &pos0 + &(&p * &b0.m_inv);
    rot0 = &rot0 + &(&turn(&b0, &r0, &p) * 0.5);
    pos1 = &pos1 - &(&p * &b1.m_inv);
    rot1 = &rot1 - &(&turn(&b1, &r1, &p) * 0.5);

    let scale = &model.collide_scale;
    let per_link = |a: &Tensor, b: &Tensor| {
        rows.sum_to_links(&zero_nan(&(a * scale)), &zero_nan(&(b * scale)), num_links)
    };
    let (dpos, drot) = (per_link(&pos0, &pos1), per_link(&rot0, &rot1));
    let x_i = Transform { pos: &x_i.pos + &dpos, rot: normalize(&(&x_i.rot + &drot)) };
    (x_i, if smooth { dlambda } else { &dlambda * &colliding })
}

/// Brax `positional.collisions.resolve_velocity`: the velocity change `[L, 3]` (linear, angular)
/// of each centre of mass from the penetrating rows — dynamic friction bounded by
/// `μ |dlambda| / dt`, and restitution against the normal velocity before the projection
/// (`xd_i_prev`) — averaged over each link's penetrating rows. `x` are the link frames (for the
/// inertias), `x_i`, `xd_i` the projected centre-of-mass frames and velocities.
pub(crate) fn resolve_velocity(
    model: &Model,
    rows: &Rows,
    x: &Transform,
    x_i: &Transform,
    xd_i: &Motion,
    xd_i_prev: &Motion,
    dlambda: &Tensor,
) -> Motion {
    let num_links = model.structure.num_links();
    let dt = model.structure.timestep;
    let c = &rows.c;
    let i_inv = inv_inertia(model, &x.rot);
    let m_inv = inv_mass(model);
    let [b0, b1] = bodies(model, rows, x_i, &i_inv, &m_inv);
    let zero3 = model.constant(&[1, 3], &[0.0; 3]);
    let velocity = |xd: &Motion, b: &Body, k: usize| {
        let links = rows.links(k, num_links);
        let (vel, ang) = (gather(&xd.vel, &zero3, &links), gather(&xd.ang, &zero3, &links));
        &vel + &cross(&ang, &(&c.pos - &b.pos))
    };
    let n = -&c.normal;
    let dist = c.dist.expand_dims(-1);
    let (r0, r1) = (&c.pos - &b0.pos, &c.pos - &b1.pos);

    // Dynamic friction against the tangential velocity.
    let rel_vel = &velocity(xd_i, &b0, 0) - &velocity(xd_i, &b1, 1);
    let v_n = dot(&rel_vel, &n);
    let v_t = &rel_vel - &(&n * &v_n);
    let (v_t_dir, v_t_norm) = normalize_with_norm(&v_t);
    let bound = &(&c.friction.expand_dims(-1) * &dlambda.abs()) / dt;
    let dvel = &(-&v_t_dir) * &bound.minimum(&v_t_norm);
    let p_dyn = &dvel / &(&(&weight(&b0, &r0, &v_t_dir) + &weight(&b1, &r1, &v_t_dir)) + 1e-6);

    // Restitution against the normal velocity before the projection.
    let rel_vel_prev = &velocity(xd_i_prev, &b0, 0) - &velocity(xd_i_prev, &b1, 1);
    let v_n_prev = dot(&rel_vel_prev, &n);
    let bounce = (&c.elasticity.expand_dims(-1) * &v_n_prev).minimum(&v_n_prev.zeros_like());
    let dv_rest = &n * &(&(-&v_n) - &bounce);
    let r1_surface = &(&c.pos + &(&c.normal * &dist)) - &b1.pos;
    let c_rest = safe_norm(&dv_rest);
    let n_rest = &dv_rest / &(&c_rest + 1e-6);
    let dlambda_rest = &c_rest / &(&(&weight(&b0, &r0, &n_rest) + &weight(&b1, &r1_surface, &n_rest)) + 1e-6);
    let zero = dist.zeros_like();
    let penetrating = dist.lt(&zero);
    let gate = match model.structure.contact_smoothing {
        None => penetrating.astype(model.dtype()),
        Some(width) => (&(-&dist) / width).sigmoid(),
    };
    let sinking = v_n_prev.le(&zero).astype(model.dtype());
    let p = &(&(&(&dlambda_rest * &n_rest) * &sinking) + &p_dyn) * &gate;

    // The impulse on body 0, the opposite one on body 1, as impulses at the centres of mass
    // (Brax `Transform.do(Force)` with zero torque: torque = offset × force), averaged per link.
    let vel = rows.sum_to_links(&p, &(-&p), num_links);
    let ang = rows.sum_to_links(&cross(&r0, &p), &cross(&r1, &(-&p)), num_links);
    let count = match model.structure.contact_smoothing {
        // Brax counts penetrating rows in f32 whatever the dtype, and adds 1e-8 there.
        None => {
            let active = penetrating.squeeze(-1).astype(DType::F32);
            let count = rows.sum_to_links(&active, &active, num_links);
            (&count + 1e-8).astype(model.dtype()).expand_dims(-1)
        }
        // Smooth onset: the summed weights, at least 1.
        Some(_) => {
            let weight = gate.squeeze(-1);
            let total = rows.sum_to_links(&weight, &weight, num_links);
            total.maximum(&total.ones_like()).expand_dims(-1)
        }
    };
    let (vel, ang) = (&vel / &count, &ang / &count);
    Motion { vel: &m_inv.expand_dims(-1) * &vel, ang: mat_vec(&i_inv, &ang) }
}
