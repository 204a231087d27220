//! Small f64 vector, quaternion (w, x, y, z) and 3×3 matrix helpers for the loader.

pub type Vec3 = [f64; 3];
pub type Quat = [f64; 4];
pub type Mat3 = [[f64; 3]; 3];

pub const QUAT_IDENTITY: Quat = [1.0, 0.0, 0.0, 0.0];

pub fn add(a: Vec3, b: Vec3) -> Vec3 {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

pub fn sub(a: Vec3, b: Vec3) -> Vec3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

pub fn scale(a: Vec3, s: f64) -> Vec3 {
    [a[0] * s, a[1] * s, a[2] * s]
}

pub fn dot(a: Vec3, b: Vec3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

pub fn cross(a: Vec3, b: Vec3) -> Vec3 {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}

pub fn norm(a: Vec3) -> f64 {
    dot(a, a).sqrt()
}

/// `a / |a|`, or `a` unchanged when it is zero (the caller reports zero axes).
pub fn normalize(a: Vec3) -> Vec3 {
    let n = norm(a);
    if n > 0.0 { scale(a, 1.0 / n) } else { a }
}

pub fn quat_normalize(q: Quat) -> Quat {
    let n = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).sqrt();
    if n > 0.0 { [q[0] / n, q[1] / n, q[2] / n, q[3] / n] } else { QUAT_IDENTITY }
}

/// Hamilton product `a ⊗ b` (apply `b`, then `a`).
pub fn quat_mul(a: Quat, b: Quat) -> Quat {
    [
        a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
        a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
        a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
        a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
    ]
}

pub fn quat_from_axis_angle(axis: Vec3, angle: f64) -> Quat {
    let a = normalize(axis);
    let (s, c) = (0.5 * angle).sin_cos();
    [c, a[0] * s, a[1] * s, a[2] * s]
}

/// MuJoCo's default `eulerseq="xyz"`: intrinsic rotations about x, then the new y, then the new z.
pub fn quat_from_euler_xyz(e: Vec3) -> Quat {
    let qx = quat_from_axis_angle([1.0, 0.0, 0.0], e[0]);
    let qy = quat_from_axis_angle([0.0, 1.0, 0.0], e[1]);
    let qz = quat_from_axis_angle([0.0, 0.0, 1.0], e[2]);
    quat_mul(quat_mul(qx, qy), qz)
}

/// The shortest rotation taking +z onto the direction `v` (MuJoCo's `mju_quatZ2Vec`): the frame of a
/// `fromto` capsule, whose axis is local z.
pub fn quat_z_to(v: Vec3) -> Quat {
    let v = normalize(v);
    let z = [0.0, 0.0, 1.0];
    let c = dot(z, v);
    let axis = cross(z, v);
    let s = norm(axis);
    if s < 1e-14 {
        if c > 0.0 { QUAT_IDENTITY } else { [0.0, 1.0, 0.0, 0.0] }
    } else {
        quat_from_axis_angle(axis, s.atan2(c))
    }
}

pub fn quat_to_mat(q: Quat) -> Mat3 {
    let [w, x, y, z] = q;
    [
        [1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - w * z), 2.0 * (x * z + w * y)],
        [2.0 * (x * y + w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - w * x)],
        [2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y)],
    ]
}

pub fn rotate(q: Quat, v: Vec3) -> Vec3 {
    mat_vec(quat_to_mat(q), v)
}

pub fn mat_vec(m: Mat3, v: Vec3) -> Vec3 {
    [dot(m[0], v), dot(m[1], v), dot(m[2], v)]
}

pub fn mat_mul(a: Mat3, b: Mat3) -> Mat3 {
    let mut out = [[0.0; 3]; 3];
    for (i, row) in out.iter_mut().enumerate() {
        for (j, cell) in row.iter_mut().enumerate() {
            *cell = (0..3).map(|k| a[i][k] * b[k][j]).sum();
        }
    }
    out
}

pub fn transpose(m: Mat3) -> Mat3 {
    let mut out = [[0.0; 3]; 3];
    for (i, row) in m.iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            out[j][i] = v;
        }
    }
    out
}

pub fn diag(d: Vec3) -> Mat3 {
    [[d[0], 0.0, 0.0], [0.0, d[1], 0.0], [0.0, 0.0, d[2]]]
}

/// `R · I · Rᵀ`: an inertia tensor given in a frame rotated by `q` expressed in the outer frame.
pub fn rotate_inertia(q: Quat, inertia: Mat3) -> Mat3 {
    let r = quat_to_mat(q);
    mat_mul(mat_mul(r, inertia), transpose(r))
}

/// Eigenvalues and eigenvectors (columns of the returned matrix, a proper rotation) of a symmetric
/// 3×3 matrix, by cyclic Jacobi sweeps.
pub fn symmetric_eigen(mut a: Mat3) -> (Vec3, Mat3) {
    let mut v: Mat3 = diag([1.0, 1.0, 1.0]);
    for _sweep in 0..50 {
        let off = a[0][1].powi(2) + a[0][2].powi(2) + a[1][2].powi(2);
        if off < 1e-30 {
            break;
        }
        for (p, q) in [(0, 1), (0, 2), (1, 2)] {
            if a[p][q].abs() < 1e-300 {
                continue;
            }
            let theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
            let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
            let t = if theta == 0.0 { 1.0 } else { t };
            let c = 1.0 / (t * t + 1.0).sqrt();
            let s = t * c;
            let mut rot = diag([1.0, 1.0, 1.0]);
            rot[p][p] = c;
            rot[q][q] = c;
            rot[p][q] = s;
            rot[q][p] = -s;
            a = mat_mul(mat_mul(transpose(rot), a), rot);
            v = mat_mul(v, rot);
        }
    }
    if det(v) < 0.0 {
        for row in v.iter_mut() {
            row[2] = -row[2];
        }
    }
    ([a[0][0], a[1][1], a[2][2]], v)
}

pub fn det(m: Mat3) -> f64 {
    dot(m[0], cross(m[1], m[2]))
}

/// The unit quaternion of a proper rotation matrix (Shepperd's method).
pub fn mat_to_quat(m: Mat3) -> Quat {
    let tr = m[0][0] + m[1][1] + m[2][2];
    let q = if tr > 0.0 {
        let s = (tr + 1.0).sqrt() * 2.0;
        [0.25 * s, (m[2][1] - m[1][2]) / s, (m[0][2] - m[2][0]) / s, (m[1][0] - m[0][1]) / s]
    } else if m[0][0] > m[1][1] && m[0][0] > m[2][2] {
        let s = (1.0 + m[0][0] - m[1][1] - m[2][2]).sqrt() * 2.0;
        [(m[2][1] - m[1][2]) / s, 0.25 * s, (m[0][1] + m[1][0]) / s, (m[0][2] + m[2][0]) / s]
    } else if m[1][1] > m[2][2] {
        let s = (1.0 + m[1][1] - m[0][0] - m[2][2]).sqrt() * 2.0;
        [(m[0][2] - m[2][0]) / s, (m[0][1] + m[1][0]) / s, 0.25 * s, (m[1][2] + m[2][1]) / s]
    } else {
        let s = (1.0 + m[2][2] - m[0][0] - m[1][1]).sqrt() * 2.0;
        [(m[1][0] - m[0][1]) / s, (m[0][2] + m[2][0]) / s, (m[1][2] + m[2][1]) / s, 0.25 * s]
    };
    let q = quat_normalize(q);
    if q[0] < 0.0 { [-q[0], -q[1], -q[2], -q[3]] } else { q }
}
