//! Analytic policy gradients on kiln's dense-reward pendulum task (`kiln_sims::rigid::apg`).

use kiln_sims::rigid::apg::{ApgArgs, train, write_curve_png};

#[test]
fn apg_balances_the_pendulum_to_95_percent_of_the_best_possible_return() {
    // Fixed seeds, Brax's reset noise on (fresh keys every iteration), a linear policy, 8 envs,
    // gradients truncated every 10 env steps (the default; see the module docs); training stops at
    // the goal to keep the test short.
    let goal = 0.95 * 200.0;
    let args = ApgArgs { batch: 8, iterations: 300, seed: 0, stop_at: Some(goal), ..ApgArgs::default() };
    let result = train(&args).unwrap();
    let r = &result.returns;
    for (i, v) in r.iter().enumerate().filter(|(i, _)| i % 10 == 0 || *i == r.len() - 1) {
        println!("iteration {i}: mean return {v:.3} (grad norm {:.3e})", result.grad_norms[i]);
    }
    println!("compile {:.2} s, train {:.2} s", result.compile_s, result.train_s);
    // Best possible: 200 steps × 1 (cos θ ≤ 1, the penalties ≥ 0); the goal is 95 % of it.
    assert_eq!(result.best_possible, 200.0);
    let untrained = r[0];
    assert!(untrained < goal, "the untrained policy already scores {untrained}");
    let first = r.iter().position(|&v| v >= goal);
    println!("untrained {untrained:.3}; first iteration ≥ {goal}: {first:?}; last {:.3}", r[r.len() - 1]);
    assert!(
        first.is_some_and(|i| i < 300),
        "mean return never reached {goal}: best {:.3}",
        r.iter().cloned().fold(f64::MIN, f64::max)
    );
    assert!(result.grad_norms.iter().all(|g| g.is_finite()));
    let dir = std::env::temp_dir().join(format!("kiln-apg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join("apg.png");
    write_curve_png(&png, &result).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    std::fs::remove_dir_all(&dir).ok();
}
