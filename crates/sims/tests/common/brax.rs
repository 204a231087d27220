//! Brax reference trajectories (`data/brax/*.npz`, copied from `shared/data/brax/`: made with
//! Brax 0.14.2 by `env.pipeline_step` from `init_q` under closed-form actions; see
//! `data/README.md`) and the error measures the pipeline tests share.

use kiln::prelude::*;
use kiln_sims::rigid::{Motion, State, Transform};
use ndarray::ArrayD;
use ndarray_npy::NpzReader;
use std::path::PathBuf;

/// A Brax reference trajectory: per env step t (the state after step t) each link's pose and
/// velocity, `q`, `qd` and the action applied, all widened to f64.
pub struct Reference {
    pub links: usize,
    pub pos: Vec<f64>,
    pub rot: Vec<f64>,
    pub vel: Vec<f64>,
    pub ang: Vec<f64>,
    pub q: Vec<f64>,
    pub qd: Vec<f64>,
    pub acts: Vec<f64>,
    pub nq: usize,
    pub nv: usize,
    pub nu: usize,
    pub q0: Vec<f64>,
    pub env_dt: f64,
}

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/brax")
}

/// An array of the file as f64, whether stored as f64 or f32 (`env_dt` is f64 in every file).
fn read(npz: &mut NpzReader<std::fs::File>, name: &str) -> (Vec<usize>, Vec<f64>) {
    let name = format!("{name}.npy");
    if let Ok(a) = npz.by_name::<ndarray::OwnedRepr<f64>, ndarray::IxDyn>(&name) {
        return (a.shape().to_vec(), a.iter().copied().collect());
    }
    let a: ArrayD<f32> = npz.by_name(&name).unwrap_or_else(|e| panic!("{name}: {e}"));
    (a.shape().to_vec(), a.iter().map(|&v| f64::from(v)).collect())
}

pub fn reference(file: &str) -> Reference {
    let path = data_dir().join(file);
    let mut npz =
        NpzReader::new(std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))).unwrap();
    let (shape, pos) = read(&mut npz, "pos");
    let (_, rot) = read(&mut npz, "rot");
    let (_, vel) = read(&mut npz, "vel");
    let (_, ang) = read(&mut npz, "ang");
    let (q_shape, q) = read(&mut npz, "q");
    let (qd_shape, qd) = read(&mut npz, "qd");
    let (a_shape, acts) = read(&mut npz, "acts");
    let (_, q0) = read(&mut npz, "q0");
    let (_, env_dt) = read(&mut npz, "env_dt");
    Reference {
        links: shape[1],
        pos,
        rot,
        vel,
        ang,
        q,
        qd,
        acts,
        nq: q_shape[1],
        nv: qd_shape[1],
        nu: a_shape[1],
        q0,
        env_dt: env_dt[0],
    }
}

impl Reference {
    pub fn slice(data: &[f64], t: usize, width: usize) -> Vec<f64> {
        data[t * width..(t + 1) * width].to_vec()
    }

    /// The stored state after env step `t`, as tensors of `dtype`.
    pub fn state(&self, t: usize, dtype: DType) -> State {
        let l = self.links;
        let tensor = |data: Vec<f64>, shape: &[usize]| Tensor::from_vec(shape, data).astype(dtype);
        State {
            q: tensor(Self::slice(&self.q, t, self.nq), &[self.nq]),
            qd: tensor(Self::slice(&self.qd, t, self.nv), &[self.nv]),
            x: Transform {
                pos: tensor(Self::slice(&self.pos, t, l * 3), &[l, 3]),
                rot: tensor(Self::slice(&self.rot, t, l * 4), &[l, 4]),
            },
            xd: Motion {
                vel: tensor(Self::slice(&self.vel, t, l * 3), &[l, 3]),
                ang: tensor(Self::slice(&self.ang, t, l * 3), &[l, 3]),
            },
        }
    }

    pub fn action(&self, t: usize, dtype: DType) -> Tensor {
        Tensor::from_vec(&[self.nu], Self::slice(&self.acts, t, self.nu)).astype(dtype)
    }
}

pub fn as_f64(t: &Tensor) -> Vec<f64> {
    t.astype(DType::F64).to_vec::<f64>()
}

pub fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

/// Max |Δ| of (pos, rot, vel, ang, q, qd) between `s` and the reference after step `t`.
pub fn errors(s: &State, r: &Reference, t: usize) -> [f64; 6] {
    let l = r.links;
    [
        max_abs_diff(&as_f64(&s.x.pos), &Reference::slice(&r.pos, t, l * 3)),
        max_abs_diff(&as_f64(&s.x.rot), &Reference::slice(&r.rot, t, l * 4)),
        max_abs_diff(&as_f64(&s.xd.vel), &Reference::slice(&r.vel, t, l * 3)),
        max_abs_diff(&as_f64(&s.xd.ang), &Reference::slice(&r.ang, t, l * 3)),
        max_abs_diff(&as_f64(&s.q), &Reference::slice(&r.q, t, r.nq)),
        max_abs_diff(&as_f64(&s.qd), &Reference::slice(&r.qd, t, r.nv)),
    ]
}
