//! Contacts of the spring pipeline (Brax `spring/collisions.py` on MJX's `plane_sphere` and
//! `plane_capsule` colliders): velocity impulses after Tiny Differentiable Simulator's smooth
//! solver — a normal impulse with restitution and a Baumgarte term `erp/dt · dist`, a friction
//! impulse capped at `μ ×` the normal one — applied only where the row penetrates, approaches and
//! pushes, and averaged over each link's active rows. As Brax, no smoothing of the contact onset
//! by default.
//!
//! **Optional smooth onset** ([`Structure::contact_smoothing`] `= Some(w)`, metres; for gradient
//! work, not in Brax). The hard penetration gate `dist < 0` becomes the weight `σ(−dist / w)`, so a
//! row starts pushing (a little) while it is still up to a few `w` above the plane, and its
//! impulse, and the gradient through it, grow smoothly from zero. Each link's rows are then averaged
//! over `max(Σ weights, 1)` instead of the count of active rows, so a barely touching row pushes
//! `σ` times its impulse rather than all of it. The other gates stay hard (approaching, `impulse >
//! 0` — the impulse is continuous there —, sliding faster than 1 mm/s for friction). As `w → 0` the
//! result tends to the hard gate's; `None` (the default) is Brax's formulation, bit for bit.
//!
//! **A Brax quirk kept on purpose.** Brax 0.14 reads each body's inverse inertia in the impulse as
//! `state.i_inv.take(link_idx)` with no axis, which indexes the *flattened* `[L, 3, 3]` array: body
//! `l` gets the scalar `i_inv.flat[l]` (for the ant's feet, links 2, 4, 6, 8: entries (0,2),
//! (1,1), (2,0), (2,2) of the torso's matrix, so two feet have almost no rotational term). Brax's
//! reference trajectories are made that way, and [`Structure::brax_contact_inertia`] (default
//! `true`) reproduces it; set it to `false` for the full matrix `I⁻¹ (r × d)`.
//!
//! [`Structure::brax_contact_inertia`]: crate::rigid::Structure::brax_contact_inertia
//! [`Structure::contact_smoothing`]: crate::rigid::Structure::contact_smoothing

use crate::rigid::kinematics::index_tensor;
use crate::rigid::model::Model;
use crate::rigid::quat::{comp, cross, dot, join, mat_vec, quat_mul, rotate, safe_norm};
use crate::rigid::state::{Motion, Transform};
use kiln::prelude::*;

/// Column 2 (the local z axis in the outer frame) of Brax `math.quat_to_3x3(q)`: `[..., 4]` →
/// `[..., 3]`.
fn z_axis(q: &Tensor) -> Tensor {
    let [w, x, y, z] = [0, 1, 2, 3].map(|k| comp(q, k));
    let s = 2.0 / &dot(q, q).squeeze(-1);
    let (xs, ys, zs) = (&x * &s, &y * &s, &z * &s);
    let (wx, wy) = (&w * &xs, &w * &ys);
    let (xx, xz, yy, yz) = (&x * &xs, &x * &zs, &y * &ys, &y * &zs);
    join(&[&xz + &wy, &yz - &wx, 1.0 - &(&xx + &yy)])
}

/// World poses of the bodies of `links` (`None`: the world, at the identity).
fn body_poses(model: &Model, x: &Transform, links: &[Option<usize>]) -> Transform {
    let n = model.structure.num_links();
    let idx = index_tensor(&links.iter().map(|l| l.unwrap_or(n)).collect::<Vec<_>>());
    let pos = Tensor::concatenate(&[x.pos.clone(), model.constant(&[1, 3], &[0.0; 3])], 0);
    let rot = Tensor::concatenate(&[x.rot.clone(), model.constant(&[1, 4], &[1.0, 0.0, 0.0, 0.0])], 0);
    Transform { pos: pos.take(&idx, 0), rot: rot.take(&idx, 0) }
}

/// The contact rows at link frames `x` (MJX `collision` as Brax `contact.get` calls it): signed
/// distance `[R]` (negative: penetrating), point `[R, 3]` and normal `[R, 3]` (the plane's z axis,
/// pointing from the plane to the other geom), friction and elasticity `[R]`.
pub(crate) struct Contacts {
    pub(crate) dist: Tensor,
    pub(crate) pos: Tensor,
    pub(crate) normal: Tensor,
    pub(crate) friction: Tensor,
    pub(crate) elasticity: Tensor,
}

pub(crate) fn contacts(model: &Model, x: &Transform) -> Contacts {
    let rows = &model.structure.contacts;
    let geom_links = &model.structure.geom_links;
    let planes: Vec<usize> = rows.iter().map(|r| r.plane).collect();
    let others: Vec<usize> = rows.iter().map(|r| r.other).collect();
    let geom = |g: &[usize]| {
        let idx = index_tensor(g);
        let body = body_poses(model, x, &g.iter().map(|&g| geom_links[g]).collect::<Vec<_>>());
        let pos = &body.pos + &rotate(&model.geom_pos.take(&idx, 0), &body.rot);
        let rot = quat_mul(&body.rot, &model.geom_rot.take(&idx, 0));
        (pos, z_axis(&rot), model.geom_size.take(&idx, 0))
    };
    let (plane_pos, normal, _) = geom(&planes);
    let (centre, axis, size) = geom(&others);
    let radius = comp(&size, 0).expand_dims(-1);
    // Capsule rows sit at `centre ± axis · half-length`; sphere rows at the centre.
    let ends: Vec<f64> = rows.iter().map(|r| r.end).collect();
    let centre = if ends.iter().all(|&e| e == 0.0) {
        centre
    } else {
        let segment = &axis * &comp(&size, 1).expand_dims(-1);
        let sign = model.constant(&[rows.len(), 1], &ends);
        let is_capsule =
            Tensor::from_vec(&[rows.len(), 1], ends.iter().map(|&e| e != 0.0).collect::<Vec<_>>());
        where_(&is_capsule, &(&centre + &(&segment * &sign)), &centre)
    };
    let dist = &dot(&(&centre - &plane_pos), &normal) - &radius;
    let pos = &centre - &(&normal * &(&radius + &(&dist * 0.5)));
    let (pi, oi) = (index_tensor(&planes), index_tensor(&others));
    Contacts {
        dist: dist.squeeze(-1),
        pos,
        normal,
        friction: model.geom_friction.take(&pi, 0).maximum(&model.geom_friction.take(&oi, 0)),
        elasticity: &(&model.elasticity.take(&pi, 0) + &model.elasticity.take(&oi, 0)) * 0.5,
    }
}

/// Brax `spring.collisions.resolve`: the velocity change `[L, 3]` (linear, angular) of each link's
/// centre of mass from the contacts at link frames `x`, given the centre-of-mass frames `x_i`, their
/// velocities after the force update `xd_i`, the inverse inertias `i_inv: [L, 3, 3]` and the masses
/// `mass: [L, 1]`. `None` for a model without contact rows.
pub(crate) fn resolve(
    model: &Model,
    x: &Transform,
    x_i: &Transform,
    xd_i: &Motion,
    i_inv: &Tensor,
    mass: &Tensor,
) -> Option<Motion> {
    let s = &model.structure;
    let rows = &s.contacts;
    if rows.is_empty() {
        return None;
    }
    let n_links = s.num_links();
    let n_rows = rows.len();
    let dt = s.timestep;
    let c = contacts(model, x);
    let nn = -&c.normal;
    // The two bodies of each row; the world is link −1 (masked out), read at the last link as
    // Brax's `take(-1)` does.
    let body = |link: &dyn Fn(usize) -> Option<usize>| {
        let ids: Vec<usize> = (0..n_rows).map(|r| link(r).unwrap_or(n_links - 1)).collect();
        let mask: Vec<f64> = (0..n_rows).map(|r| if link(r).is_some() { 1.0 } else { 0.0 }).collect();
        let idx = index_tensor(&ids);
        let mask = model.constant(&[n_rows, 1], &mask);
        let rel_pos = &c.pos - &x_i.pos.take(&idx, 0);
        let vel = &xd_i.vel.take(&idx, 0) + &cross(&xd_i.ang.take(&idx, 0), &rel_pos);
        let inv_i = if s.brax_contact_inertia {
            // Element `link` of the flattened `[L, 3, 3]` array, as Brax (see the module docs).
            &i_inv.reshape(&[-1]).take(&idx, 0).expand_dims(-1) * &mask
        } else {
            &i_inv.take(&idx, 0) * &mask.expand_dims(-1)
        };
        let inv_m = &(1.0 / &mass.take(&idx, 0)) * &mask;
        (rel_pos, &vel * &mask, inv_i, inv_m)
    };
    let (p1, v1, ii1, im1) = body(&|r| rows[r].link1);
    let (p2, v2, ii2, im2) = body(&|r| rows[r].link2);
    // Effective inverse mass along `dir` at the contact point (both bodies).
    // `I⁻¹ (r × d)`: a scalar (Brax) or a matrix times the lever.
    let lever = |inv_i: &Tensor, r: &Tensor, dir: &Tensor| {
        if s.brax_contact_inertia { inv_i * &cross(r, dir) } else { mat_vec(inv_i, &cross(r, dir)) }
    };
    let angular = |dir: &Tensor| {
        let t1 = lever(&ii1, &p1, dir);
        let t2 = lever(&ii2, &p2, dir);
        dot(dir, &(&cross(&t1, &p1) + &cross(&t2, &p2)))
    };
    let inv_mass = &im1 + &im2;
    let contact_vel = &v1 - &v2;
    let normal_vel = dot(&nn, &contact_vel);
    let dist = c.dist.expand_dims(-1);
    let baumgarte_vel = &(&model.baumgarte_erp / dt) * &dist;
    let restitution = &(1.0 + &c.elasticity.expand_dims(-1)) * -1.0;
    let impulse = &(&(&restitution * &normal_vel) - &baumgarte_vel) / &(&inv_mass + &angular(&nn));
    let impulse_vec = &impulse * &nn;

    // Friction: a drag against the sliding velocity, capped at μ × the normal impulse.
    let vel_d = &contact_vel + &(&normal_vel * &c.normal);
    let speed_d = safe_norm(&vel_d);
    let dir_d = &vel_d / &(&speed_d + 1e-6);
    let impulse_d =
        (&speed_d / &(&inv_mass + &angular(&dir_d))).minimum(&(&c.friction.expand_dims(-1) * &impulse));
    let impulse_d_vec = &(&impulse_d * -1.0) * &dir_d;

    let zero = dist.zeros_like();
    let dtype = model.dtype();
    let sliding = speed_d.gt(&Tensor::scalar_like(1e-3, dtype));
    // Per-row weights of the normal and friction impulses: Brax's hard gates, or the smooth onset.
    let (apply_n, weight_n, weight_d) = match s.contact_smoothing {
        None => {
            let apply_n = dist.lt(&zero).logical_and(&normal_vel.lt(&zero)).logical_and(&impulse.gt(&zero));
            let apply_d = apply_n.logical_and(&sliding);
            (Some(apply_n.clone()), apply_n.astype(dtype), apply_d.astype(dtype))
        }
        Some(width) => {
            let pushing = normal_vel.lt(&zero).logical_and(&impulse.gt(&zero)).astype(dtype);
            let weight = &(&(-&dist) / width).sigmoid() * &pushing;
            let weight_d = &weight * &sliding.astype(dtype);
            (None, weight, weight_d)
        }
    };
    let f = &(&impulse_vec * &weight_n) + &(&impulse_d_vec * &weight_d);

    // The impulse on body 1, the opposite one on body 2, as linear and angular impulses at the
    // centres of mass; averaged over each link's active rows.
    let ids: Vec<i32> = rows
        .iter()
        .map(|r| r.link1.map_or(-1, |l| l as i32))
        .chain(rows.iter().map(|r| r.link2.map_or(-1, |l| l as i32)))
        .collect();
    let ids = Tensor::from_vec(&[2 * n_rows], ids);
    let lin = Tensor::concatenate(&[f.clone(), -&f], 0);
    let ang = Tensor::concatenate(&[cross(&p1, &f), cross(&p2, &(-&f))], 0);
    let count = match apply_n {
        // Brax counts active rows in f32 whatever the dtype, and adds 1e-8 there.
        Some(apply_n) => {
            let active = apply_n.astype(DType::F32);
            let count = Tensor::concatenate(&[active.clone(), active], 0).segment_sum(&ids, n_links);
            (&count + 1e-8).astype(dtype)
        }
        // Smooth onset: the summed weights, at least 1 (see the module docs).
        None => {
            let weight = weight_n.clone();
            let total = Tensor::concatenate(&[weight.clone(), weight], 0).segment_sum(&ids, n_links);
            total.maximum(&total.ones_like())
        }
    };
    let lin = &lin.segment_sum(&ids, n_links) / &count;
    let ang = &ang.segment_sum(&ids, n_links) / &count;
    Some(Motion { vel: &lin / mass, ang: mat_vec(i_inv, &ang) })
}
