//! Brax's `positional` pipeline (brax 0.14, `brax/positional/pipeline.py`) written with kiln ops:
//! extended position-based dynamics (Müller et al. 2020) on maximal coordinates, traced like any
//! user program, so it goes through `jit`, `vmap`, `grad` and `scan`.
//!
//! Every link is a free rigid body whose centre-of-mass frame is integrated, then projected back
//! onto the joint and contact constraints. One [`step`] of `dt` = the model's timestep:
//! 1. actuator forces `tau = gear · clip(ctrl)` (Brax `actuator.to_tau`) and joint damping only
//!    — no joint springs — as wrenches at the centres of mass (`joints::acceleration_update`);
//! 2. semi-implicit Euler: velocities from gravity + `F/m`, `I⁻¹ τ`, then positions
//!    (Brax `integrator.integrate_xdd`), with `m^(1 − spring_mass_scale)`, `I^(1 − spring_inertia_scale)`;
//! 3. one position-level pass over the joints: translation and rotation corrections including
//!    limits, scaled by `joint_scale_pos`/`joint_scale_ang` (`joints::position_update`);
//! 4. one position-level pass over the contacts, with static friction
//!    (`collisions::resolve_position`);
//! 5. velocities from the displacement over the step (Brax `integrator.project_xd`);
//! 6. a velocity-level contact pass: dynamic friction and restitution
//!    (`collisions::resolve_velocity`), after velocity damping (Brax `integrator.integrate_xdv`);
//! 7. back to joint coordinates by inverse kinematics.
//!
//! Brax keeps the centre-of-mass frames, joint frames and anchors in its positional `State`; kiln's
//! [`State`] is (`q`, `qd`, `x`, `xd`) as for the spring pipeline, and those are recomputed from
//! `x`, `xd` (equal to rounding). As in Brax, a model without contacts never renormalizes the
//! orientations after the joint pass, so `x.rot` is a unit quaternion only to first order.
//!
//! ```
//! use kiln::prelude::*;
//! use kiln_sims::rigid::{Model, System, positional};
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/mjcf/inverted_pendulum.xml");
//! let sys = System::from_mjcf_file(path)?;
//! let model = Model::new(&sys, DType::F64)?.with_timestep(0.005);
//! let state = positional::init(&model, &Tensor::from_vec(&[2], vec![0.0, 0.1]), &Tensor::zeros(DType::F64, &[2]));
//! // 20 steps of 5 ms (a `scan` of `step`): gravity tips the pole further; the cart stays on its rail.
//! let next = positional::steps(&model, &state, &Tensor::from_vec(&[1], vec![0.0]), 20);
//! let (q, qd) = (next.q.to_vec::<f64>(), next.qd.to_vec::<f64>());
//! assert!(q[1] > 0.1 && qd[1] > 0.0, "q {q:?} qd {qd:?}");
//! let cart_y = next.x.pos.to_vec::<f64>()[1];
//! assert!(cart_y.abs() < 1e-9, "the slide joint holds the cart on the x axis: y = {cart_y}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod collisions;
pub mod joints;

use super::kinematics::{forward, inverse, world_to_joint};
use super::model::Model;
use super::quat::{comp, join, mat_vec, normalize, quat_inv, quat_mul, rotate, safe_norm};
use super::spring::{actuator_tau, inv_inertia};
use super::state::{Motion, State, Transform};
use kiln::prelude::*;

/// Brax `positional.pipeline.init`: the state at joint positions `q: [nq]` and velocities
/// `qd: [nv]` (forward kinematics gives the link frames).
pub fn init(model: &Model, q: &Tensor, qd: &Tensor) -> State {
    let (x, xd) = forward(model, q, qd);
    State { q: q.clone(), qd: qd.clone(), x, xd }
}

/// Brax `com.from_world`: centre-of-mass frames and velocities from link frames `x` and
/// velocities `xd` (`[L, ...]`).
fn from_world(model: &Model, x: &Transform, xd: &Motion) -> (Transform, Motion) {
    let x_i = Transform { pos: &x.pos + &rotate(&model.com, &x.rot), rot: x.rot.clone() };
    let xd_i = xd.translate(&(&x_i.pos - &x.pos));
    (x_i, xd_i)
}

/// Brax `com.to_world`: link frames and velocities from centre-of-mass frames and velocities.
fn to_world(model: &Model, x_i: &Transform, xd_i: &Motion) -> (Transform, Motion) {
    let x = Transform { pos: &x_i.pos + &rotate(&(-&model.com), &x_i.rot), rot: x_i.rot.clone() };
    let xd = xd_i.translate(&(&x.pos - &x_i.pos));
    (x, xd)
}

/// Brax `math.normalize` returning the norm as well: `(x / |x|, |x|)` over the last axis, with
/// `x / 1e-6` for a zero vector and a zero gradient there. `[..., n]` → (`[..., n]`, `[..., 1]`).
pub(crate) fn normalize_with_norm(x: &Tensor) -> (Tensor, Tensor) {
    let n = safe_norm(x);
    let at_zero = n.eq(&Tensor::scalar_like(0.0, x.dtype())).astype(x.dtype());
    (x / &(&n + &(&at_zero * 1e-6)), n)
}

/// `1 / m^(1 − spring_mass_scale)` per link: `[L]`.
pub(crate) fn inv_mass(model: &Model) -> Tensor {
    1.0 / &model.mass.pow(&(1.0 - &model.spring_mass_scale))
}

/// Brax `integrator.project_xd`: the velocities that carry the centre-of-mass frames `x_prev` to
/// `x_i` in one step — `Δpos / dt`, and `2 · vec(q ⊗ q_prev⁻¹) / dt` with the sign of the
/// relative quaternion's real part.
fn project_xd(x_i: &Transform, x_prev: &Transform, dt: f64) -> Motion {
    let vel = &(&x_i.pos - &x_prev.pos) / dt;
    let dq = quat_mul(&x_i.rot, &quat_inv(&x_prev.rot));
    let ang = &(&dq.slice_axis(-1, Some(1), None, 1) * 2.0) / dt;
    let w = dq.slice_axis(-1, Some(0), Some(1), 1);
    let dtype = w.dtype();
    let sign = where_(
        &w.ge(&Tensor::scalar_like(0.0, dtype)),
        &Tensor::scalar_like(1.0, dtype),
        &Tensor::scalar_like(-1.0, dtype),
    );
    Motion { vel, ang: &sign * &ang }
}

/// One positional-pipeline step of `dt` under the controls `act: [nu]` (Brax
/// `positional.pipeline.step`). Shapes and dtype of the result are those of `state`.
pub fn step(model: &Model, state: &State, act: &Tensor) -> State {
    let dt = model.structure.timestep;
    let (x_i_prev, xd_i) = from_world(model, &state.x, &state.xd);
    let frames = world_to_joint(model, &state.x, &state.xd);
    let inv_m = inv_mass(model).expand_dims(-1);

    // Accelerations from gravity, actuators and joint damping; semi-implicit Euler.
    let tau = actuator_tau(model, act);
    let f = joints::acceleration_update(model, &frames, &x_i_prev, &tau);
    let acc_vel = &model.gravity + &(&inv_m * &f.vel);
    let acc_ang = mat_vec(&inv_inertia(model, &state.x.rot), &f.ang);
    let vel_decay = (&model.vel_damping * dt).exp();
    let ang_decay = (&model.ang_damping * dt).exp();
    let vel = &vel_decay * &(&xd_i.vel + &(&acc_vel * dt));
    let ang = &ang_decay * &(&xd_i.ang + &(&acc_ang * dt));
    let zero = comp(&ang, 0).zeros_like();
    let spin = &(&join(&[zero, comp(&ang, 0), comp(&ang, 1), comp(&ang, 2)]) * 0.5) * dt;
    let rot = normalize(&(&x_i_prev.rot + &quat_mul(&spin, &x_i_prev.rot)));
    let x_i = Transform { pos: &x_i_prev.pos + &(&vel * dt), rot };
    let xd_i_prev = Motion { vel, ang };
    let (x, xd) = to_world(model, &x_i, &xd_i_prev);

    // Position-level joint and contact passes.
    let x_i = joints::position_update(model, &x, &xd, &x_i);
    let (x, _) = to_world(model, &x_i, &xd_i_prev);
    let contacts = collisions::Rows::new(model, &x);
    let (x_i, dlambda) = match &contacts {
        Some(c) => {
            let (x_i, dlambda) = collisions::resolve_position(model, c, &x, &x_i, &x_i_prev);
            (x_i, Some(dlambda))
        }
        None => (x_i, None),
    };

    // Velocities from the displacement, then the velocity-level contact pass.
    let xd_i = project_xd(&x_i, &x_i_prev, dt);
    let xd_i_damped = Motion { vel: &vel_decay * &xd_i.vel, ang: &ang_decay * &xd_i.ang };
    let xd_i = match (&contacts, &dlambda) {
        (Some(c), Some(dlambda)) => {
            let (x, _) = to_world(model, &x_i, &xd_i);
            let dv = collisions::resolve_velocity(model, c, &x, &x_i, &xd_i, &xd_i_prev, dlambda);
            Motion { vel: &xd_i_damped.vel + &dv.vel, ang: &xd_i_damped.ang + &dv.ang }
        }
        _ => xd_i_damped,
    };

    let (x, xd) = to_world(model, &x_i, &xd_i);
    let (q, qd) = inverse(model, &world_to_joint(model, &x, &xd));
    State { q, qd, x, xd }
}

/// `n_frames` pipeline steps under the same controls, as a `scan` (Brax `PipelineEnv.pipeline_step`).
pub fn steps(model: &Model, state: &State, act: &Tensor, n_frames: usize) -> State {
    let opts = ScanOptions { length: Some(n_frames), reverse: false };
    let (out, ()) = scan_with(|s: State, (): ()| (step(model, &s, act), ()), state.clone(), (), opts);
    out
}
