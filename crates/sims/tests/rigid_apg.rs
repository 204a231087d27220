//! Analytic policy gradients on kiln's dense-reward pendulum task (`kiln_sims::rigid::apg`).

use kiln_sims::rigid::apg::{ApgArgs, train, write_curve_png};

#[test]
fn apg_balances_the_pendulum_to_95_percent_of_the_best_possible_return() {
    // Fixed seeds, Brax's reset noise on (fresh keys every iteration), a linear policy, 32 envs,
    // gradients truncated every 10 env steps (the default; see the module docs). Each iteration's
    // return is the mean over 32 fresh episodes of the current policy, so the trained policy is
    // judged on episodes it was not fitted to: every one of the last 10 of 60 iterations must be
    // at 95 % of the best possible (a single lucky batch does not pass).
    let goal = 0.95 * 200.0;
    let args = ApgArgs { batch: 32, iterations: 60, seed: 0, stop_at: None, ..ApgArgs::default() };
    let result = train(&args).unwrap();
    let r = &result.returns;
    for (i, v) in r.iter().enumerate().filter(|(i, _)| i % 10 == 0 || *i == r.len() - 1) {
        println!("iteration {i}: mean return {v:.3} (grad norm {:.3e})", result.grad_norms[i]);
    }
    println!("compile {:.2} s, train {:.2} s", result.compile_s, result.train_s);
    // Best possible: 200 steps × 1 (cos θ ≤ 1, the penalties ≥ 0); the goal is 95 % of it.
    assert_eq!(result.best_possible, 200.0);
    assert_eq!(r.len(), 60);
    let untrained = r[0];
    assert!(untrained < goal, "the untrained policy already scores {untrained}");
    let last = &r[50..];
    assert!(last.iter().all(|&v| v >= goal && v <= 200.0), "last 10 iterations {last:?} not all ≥ {goal}");
    assert!(result.grad_norms.iter().all(|g| g.is_finite()));
    let dir = std::env::temp_dir().join(format!("kiln-apg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join("apg.png");
    write_curve_png(&png, &result).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_truncation_that_does_not_divide_the_horizon_is_an_args_error() {
    // Regression (bad-input hunt): `train` panicked in `episode_return` ("truncation 7 must divide
    // the horizon 20") although its errors are `ApgError` and `Args` exists for this.
    use kiln_sims::rigid::apg::ApgError;
    for k in [7, 0] {
        let args = ApgArgs { horizon: 20, truncation: Some(k), ..ApgArgs::default() };
        let err = train(&args).err().expect("an error");
        assert!(
            matches!(err, ApgError::Args(_)) && err.to_string().contains("divide the horizon 20"),
            "{err}"
        );
    }
}
