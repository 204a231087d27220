//! Gradients with respect to the model's physical parameters (issue 8: "masses, stiffness, friction
//! as well as actions"), f64, against central finite differences to 1e-4 relative:
//! - the spring inverted pendulum: d(pole angle after 50 env steps)/d(link masses, the joints'
//!   `constraint_stiffness`, `constraint_vel_damping`, `constraint_ang_damping`) — Brax's spring
//!   pipeline models joints as these stiff springs and dampers;
//! - the ant with its feet on the floor (Brax's trajectory from env step 12), 10 env steps:
//!   d(torso height)/d(friction, elasticity, the contact stiffness — the spring pipeline's Baumgarte
//!   `baumgarte_erp`, the positional pipeline's `collide_scale` — and the mass exponent
//!   `spring_mass_scale`), spring and positional. Brax's ant sets `spring_mass_scale = 1`, so both
//!   pipelines use `mass^(1 − 1) = 1` and the torso's height does not depend on the link masses at
//!   all: the test checks that their gradient and finite differences are exactly 0.
//!
//! Every parameter is a leaf of the `Model` pytree, so the loss is a function of a tensor swapped into
//! the model: nothing is baked in at trace time. Friction enters as `max(μ_plane, μ_foot)` and both
//! are 1 in the ant's file, so it is varied as a common factor `s · μ` (a tie of `max` otherwise has
//! no derivative); elasticity likewise as a common offset `e + δ`.

use kiln::prelude::*;
use kiln_sims::rigid::{Model, State, System, positional, spring};

mod common;
use common::brax::reference;

/// Checks `jit(grad(loss))` at `params` against central differences of `jit(loss)`, each entry
/// perturbed by `±eps[i] · max(|p|, 1)`, to `tol` relative (entries whose finite difference is
/// below `1e-6 ·` the largest derivative of that parameter are checked absolutely against that).
/// Parameters listed in `zero` must have exactly zero gradient and finite differences.
fn check<F>(what: &str, loss: F, params: Vec<Tensor>, names: &[&str], zero: &[usize], tol: f64)
where
    F: Fn(Vec<Tensor>) -> Tensor + Clone,
{
    let value = jit(loss.clone());
    let gradient = jit(grad(loss));
    let grads = gradient.call(&params).unwrap();
    let base: Vec<Vec<f64>> = params.iter().map(|p| p.to_vec::<f64>()).collect();
    for (i, name) in names.iter().enumerate() {
        let g = grads[i].to_vec::<f64>();
        assert!(g.iter().all(|v| v.is_finite()), "{what}: d/d{name} = {g:?}");
        let g_max = g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let mut fds = Vec::new();
        for k in 0..g.len() {
            let eps = 1e-6 * base[i][k].abs().max(1.0);
            let at = |delta: f64| {
                let mut p = params.clone();
                let mut v = base[i].clone();
                v[k] += delta;
                p[i] = Tensor::from_vec(params[i].shape().dims(), v);
                value.call(&p).unwrap().item::<f64>()
            };
            let fd = (at(eps) - at(-eps)) / (2.0 * eps);
            if zero.contains(&i) {
                println!("{what}: d/d{name}[{k}] grad {:e}, central difference {fd:e}", g[k]);
                assert!(g[k] == 0.0 && fd == 0.0, "{what}: d/d{name}[{k}] should be 0: {} and {fd}", g[k]);
                continue;
            }
            let rel = (g[k] - fd).abs() / fd.abs().max(1e-6 * g_max);
            println!("{what}: d/d{name}[{k}] grad {:.9e}, central difference {fd:.9e}, rel {rel:.1e}", g[k]);
            assert!(
                rel < tol,
                "{what}: d/d{name}[{k}]: grad {} vs central difference {fd} (rel {rel:.2e})",
                g[k]
            );
            fds.push(fd);
        }
        // Not a vacuous check: the parameter moves the loss.
        assert!(
            zero.contains(&i) || fds.iter().any(|fd| fd.abs() > 1e-8),
            "{what}: d/d{name} is zero: {fds:?}"
        );
    }
}

fn load(file: &str, timestep: f64) -> Model {
    let path = format!("{}/data/mjcf/{file}", env!("CARGO_MANIFEST_DIR"));
    let sys = System::from_mjcf_file(path).unwrap();
    Model::new(&sys, DType::F64).unwrap().with_timestep(timestep)
}

#[test]
fn inverted_pendulum_pole_angle_gradient_wrt_masses_and_joint_springs_matches_central_differences() {
    let r = reference("ip_spring_f64.npz");
    let model = load("inverted_pendulum.xml", 0.005);
    let n_frames = 4;
    let steps = 50;
    let acts = Tensor::from_vec(&[steps, 1], r.acts[..steps].to_vec());
    let q0 = Tensor::from_vec(&[r.q0.len()], r.q0.clone());
    let params = vec![
        model.mass.clone(),
        model.constraint_stiffness.clone(),
        model.constraint_vel_damping.clone(),
        model.constraint_ang_damping.clone(),
    ];
    let loss = move |p: Vec<Tensor>| {
        let mut m = model.clone();
        m.mass = p[0].clone();
        m.constraint_stiffness = p[1].clone();
        m.constraint_vel_damping = p[2].clone();
        m.constraint_ang_damping = p[3].clone();
        let s0 = spring::init(&m, &q0, &Tensor::zeros(DType::F64, &[2]));
        let (last, ()) =
            scan(|s: State, a: Tensor| (spring::steps(&m, &s, &a, n_frames), ()), s0, acts.clone());
        last.q.index(1)
    };
    let names = ["mass", "constraint_stiffness", "constraint_vel_damping", "constraint_ang_damping"];
    check("pendulum angle", loss, params, &names, &[], 1e-4);
}

/// The torso's height after 10 env steps from Brax's state at env step 12 (the ant stands on its
/// feet), under Brax's actions, as a function of (friction factor, elasticity offset, contact
/// stiffness, mass exponent, masses).
fn ant_loss(
    file: &'static str,
    pipeline: fn(&Model, &State, &Tensor, usize) -> State,
    set_stiffness: fn(&mut Model, Tensor),
) -> (impl Fn(Vec<Tensor>) -> Tensor + Clone, Model) {
    let r = reference(file);
    let model = load("ant.xml", 0.005);
    assert_eq!(model.structure.contacts.len(), 4, "the four feet against the floor");
    let (start, steps, n_frames) = (12usize, 10usize, 10usize);
    let s0 = r.state(start, DType::F64);
    let acts =
        Tensor::from_vec(&[steps, r.nu], r.acts[(start + 1) * r.nu..(start + 1 + steps) * r.nu].to_vec());
    let base = model.clone();
    let loss = move |p: Vec<Tensor>| {
        let mut m = base.clone();
        m.geom_friction = &base.geom_friction * &p[0];
        m.elasticity = &base.elasticity + &p[1];
        set_stiffness(&mut m, p[2].clone());
        m.spring_mass_scale = p[3].clone();
        m.mass = p[4].clone();
        let (last, ()) =
            scan(|s: State, a: Tensor| (pipeline(&m, &s, &a, n_frames), ()), s0.clone(), acts.clone());
        last.x.pos.index(0).index(2)
    };
    (loss, model)
}

const ANT_NAMES: [&str; 5] =
    ["friction factor", "elasticity offset", "contact stiffness", "spring_mass_scale", "mass"];

#[test]
fn ant_spring_torso_height_gradient_wrt_friction_elasticity_erp_and_mass_exponent_matches_central_differences()
 {
    let (loss, model) = ant_loss("ant_spring_f64.npz", spring::steps, |m, p| m.baumgarte_erp = p);
    let one = || Tensor::scalar_like(1.0, DType::F64);
    let params = vec![
        one(),
        Tensor::scalar_like(0.0, DType::F64),
        model.baumgarte_erp.clone(),
        model.spring_mass_scale.clone(),
        model.mass.clone(),
    ];
    check("ant spring torso z", loss, params, &ANT_NAMES, &[4], 1e-4);
}

#[test]
fn ant_positional_torso_height_gradient_wrt_friction_elasticity_collide_scale_and_mass_exponent_matches_central_differences()
 {
    let (loss, model) = ant_loss("ant_positional_f64.npz", positional::steps, |m, p| m.collide_scale = p);
    let one = || Tensor::scalar_like(1.0, DType::F64);
    let params = vec![
        one(),
        Tensor::scalar_like(0.0, DType::F64),
        model.collide_scale.clone(),
        model.spring_mass_scale.clone(),
        model.mass.clone(),
    ];
    check("ant positional torso z", loss, params, &ANT_NAMES, &[4], 1e-4);
}
