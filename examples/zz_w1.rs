#[path = "../benches/workloads/mod.rs"]
mod workloads;
fn main() {
    let filter = std::env::args().nth(1).unwrap();
    let reps: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    for case in workloads::all_cases() {
        let name = format!("{} {} {}", case.workload, case.variant, case.size);
        if name != filter {
            continue;
        }
        let mut run = (case.make)();
        run();
        let t = std::time::Instant::now();
        for _ in 0..reps {
            std::hint::black_box(run());
        }
        println!("{name}: {:.3} us/call", t.elapsed().as_secs_f64() * 1e6 / reps as f64);
    }
}
