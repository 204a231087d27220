//! Brax's `spring` pipeline (brax 0.14, `brax/spring/pipeline.py`) written with kiln ops, so a
//! step is traced like any user program and goes through `jit`, `vmap`, `grad` and `scan`.
//!
//! Every link is a free rigid body; joints are stiff springs and dampers ([`joints`]). One
//! [`step`] of `dt` = [`Structure::timestep`](super::model::Structure):
//! 1. actuator forces `tau = gear · clip(ctrl)` on the DoFs (Brax `actuator.to_tau`);
//! 2. joint wrenches at the centres of mass (Brax `joints.resolve`);
//! 3. semi-implicit Euler on the velocities: gravity + `F/m`, `I⁻¹ τ`, with Brax's rescaled mass
//!    `m^(1 − spring_mass_scale)` and inertia `I^(1 − spring_inertia_scale)`;
//! 4. contacts as velocity impulses ([`collisions`]: plane–sphere and plane–capsule rows);
//! 5. positions: `p += v dt`, `q += ½ dt (0, ω) ⊗ q`, renormalized (Brax `integrator.integrate`);
//! 6. back to joint coordinates by inverse kinematics.
//!
//! The state is (`q`, `qd`, `x`, `xd`); Brax also caches the centre-of-mass frames between steps,
//! which kiln recomputes from `x`, `xd` (equal to rounding).
//!
//! ```
//! use kiln::prelude::*;
//! use kiln_sims::rigid::{Model, System, spring};
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/mjcf/inverted_pendulum.xml");
//! let sys = System::from_mjcf_file(path)?;
//! let model = Model::new(&sys, DType::F64)?.with_timestep(0.005);
//! let state = spring::init(&model, &Tensor::from_vec(&[2], vec![0.0, 0.1]), &Tensor::zeros(DType::F64, &[2]));
//! // 20 steps of 5 ms (a `scan` of `step`): gravity tips the pole further, through the joint springs.
//! let next = spring::steps(&model, &state, &Tensor::from_vec(&[1], vec![0.0]), 20);
//! let (q, qd) = (next.q.to_vec::<f64>(), next.qd.to_vec::<f64>());
//! assert!(q[1] > 0.1 && qd[1] > 0.0, "q {q:?} qd {qd:?}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod collisions;
pub mod joints;

use super::kinematics::{forward, index_tensor, inverse, world_to_joint};
use super::model::Model;
use super::quat::{comp, join, mat_vec, norm, quat_mul, rotate};
use super::state::{Motion, State, Transform};
use kiln::prelude::*;

/// Brax `spring.pipeline.init`: the state at joint positions `q: [nq]` and velocities `qd: [nv]`
/// (forward kinematics gives the link frames).
pub fn init(model: &Model, q: &Tensor, qd: &Tensor) -> State {
    let (x, xd) = forward(model, q, qd);
    State { q: q.clone(), qd: qd.clone(), x, xd }
}

/// Brax `actuator.to_tau`: joint forces `[nv]` from actuator controls `act: [nu]` (motors:
/// `gear · clip(clip(ctrl, ctrlrange), forcerange)`, summed onto the driven DoFs).
pub fn actuator_tau(model: &Model, act: &Tensor) -> Tensor {
    let s = &model.structure;
    let tau = model.constant(&[s.nv], &vec![0.0; s.nv]);
    if s.actuator_dofs.is_empty() {
        return tau;
    }
    let ctrl = act.maximum(&model.ctrl_lo).minimum(&model.ctrl_hi);
    let force = &ctrl.maximum(&model.force_lo).minimum(&model.force_hi) * &model.gear;
    tau.at_add(&index_tensor(&s.actuator_dofs), &force)
}

/// Brax `com.inv_inertia`: each link's inverse inertia about its centre of mass in world axes,
/// `R diag(1 / I^(1 − spring_inertia_scale)) Rᵀ` with `R` the principal axes' world orientation
/// (`[L, 3, 3]`), built from rotations as Brax does.
pub fn inv_inertia(model: &Model, rot: &Tensor) -> Tensor {
    let ri = quat_mul(rot, &model.inertia_rot);
    let inv = 1.0 / &model.inertia_diag.pow(&(1.0 - &model.spring_inertia_scale));
    let rows: Vec<Tensor> = (0..3)
        .map(|k| {
            let d = comp(&inv, k);
            let z = d.zeros_like();
            let row = match k {
                0 => join(&[d, z.clone(), z]),
                1 => join(&[z.clone(), d, z]),
                _ => join(&[z.clone(), z, d]),
            };
            rotate(&row, &ri)
        })
        .collect();
    let out: Vec<Tensor> = (0..3)
        .map(|i| rotate(&join(&[comp(&rows[0], i), comp(&rows[1], i), comp(&rows[2], i)]), &ri))
        .collect();
    Tensor::stack(&out, -2)
}

/// One spring-pipeline step of `dt` under the controls `act: [nu]` (Brax `spring.pipeline.step`).
/// Shapes and dtype of the result are those of `state`.
pub fn step(model: &Model, state: &State, act: &Tensor) -> State {
    let dt = model.structure.timestep;
    let (x, xd) = (&state.x, &state.xd);
    // Centre-of-mass frames (Brax `com.from_world`).
    let x_i = Transform { pos: &x.pos + &rotate(&model.com, &x.rot), rot: x.rot.clone() };
    let xd_i = xd.translate(&(&x_i.pos - &x.pos));
    let frames = world_to_joint(model, x, xd);
    let i_inv = inv_inertia(model, &x.rot);
    let mass = model.mass.pow(&(1.0 - &model.spring_mass_scale)).expand_dims(-1);

    // Accelerations, then semi-implicit Euler on the velocities.
    let tau = actuator_tau(model, act);
    let f = joints::resolve(model, &frames, &x_i, &tau);
    let acc_vel = &model.gravity + &(&f.vel / &mass);
    let acc_ang = mat_vec(&i_inv, &f.ang);
    let vel = &xd_i.vel + &(&acc_vel * dt);
    let ang = &xd_i.ang + &(&acc_ang * dt);

    let contact =
        collisions::resolve(model, x, &x_i, &Motion { vel: vel.clone(), ang: ang.clone() }, &i_inv, &mass);

    // Brax `integrator.integrate`: damping, the contacts' velocity change, then positions.
    let vel = &(&model.vel_damping * dt).exp() * &vel;
    let ang = &(&model.ang_damping * dt).exp() * &ang;
    let (vel, ang) = match contact {
        Some(dv) => (&vel + &dv.vel, &ang + &dv.ang),
        None => (vel, ang),
    };
    let zero = comp(&ang, 0).zeros_like();
    let spin = &(&join(&[zero, comp(&ang, 0), comp(&ang, 1), comp(&ang, 2)]) * 0.5) * dt;
    let rot = &x_i.rot + &quat_mul(&spin, &x_i.rot);
    let x_i = Transform { pos: &x_i.pos + &(&vel * dt), rot: &rot / &norm(&rot) };
    let xd_i = Motion { vel, ang };

    // Back to link frames (Brax `com.to_world`) and joint coordinates.
    let pos = &x_i.pos + &rotate(&(-&model.com), &x_i.rot);
    let xd = xd_i.translate(&(&pos - &x_i.pos));
    let x = Transform { pos, rot: x_i.rot };
    let (q, qd) = inverse(model, &world_to_joint(model, &x, &xd));
    State { q, qd, x, xd }
}

/// `n_frames` pipeline steps under the same controls, as a `scan` (Brax `PipelineEnv.pipeline_step`).
pub fn steps(model: &Model, state: &State, act: &Tensor, n_frames: usize) -> State {
    let opts = ScanOptions { length: Some(n_frames), reverse: false };
    let (out, ()) = scan_with(|s: State, (): ()| (step(model, &s, act), ()), state.clone(), (), opts);
    out
}
