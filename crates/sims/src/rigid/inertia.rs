//! Geom volumes and inertias (MuJoCo's formulas), and summing mass elements into a link.

use super::math::{Mat3, Vec3, add, diag, dot, mat_to_quat, scale, sub, symmetric_eigen};
use super::system::GeomType;

/// A piece of mass in a link frame: a geom, or a body's `<inertial>`.
#[derive(Debug, Clone, Copy)]
pub struct MassElement {
    /// kg
    pub mass: f64,
    /// Centre of mass in the link frame (m).
    pub com: Vec3,
    /// Inertia about `com`, in link-frame axes (kg·m²).
    pub inertia: Mat3,
}

/// Volume (m³) of a solid geom; planes have none.
pub fn volume(kind: GeomType, size: Vec3) -> f64 {
    use std::f64::consts::PI;
    match kind {
        GeomType::Plane => 0.0,
        GeomType::Sphere => 4.0 / 3.0 * PI * size[0].powi(3),
        GeomType::Capsule => {
            let (r, height) = (size[0], 2.0 * size[1]);
            PI * r * r * height + 4.0 / 3.0 * PI * r.powi(3)
        }
        GeomType::Box => 8.0 * size[0] * size[1] * size[2],
    }
}

/// Principal inertia (kg·m²) of a geom of `mass` about its own centre, in its own axes
/// (capsule axis = z), with MuJoCo's formulas.
pub fn principal_inertia(kind: GeomType, size: Vec3, mass: f64) -> Vec3 {
    use std::f64::consts::PI;
    match kind {
        GeomType::Plane => [0.0; 3],
        GeomType::Sphere => [0.4 * mass * size[0] * size[0]; 3],
        GeomType::Capsule => {
            // Split the mass between the cylinder and the two caps by volume; each cap's inertia
            // about the centre comes from the parallel-axis theorem on a hemisphere (COM 3r/8 from
            // its flat face): caps total m_s·(2r²/5 + H²/4 + 3Hr/8) across the axis.
            let (r, height) = (size[0], 2.0 * size[1]);
            let v_cyl = PI * r * r * height;
            let v_sph = 4.0 / 3.0 * PI * r.powi(3);
            let m_cyl = mass * v_cyl / (v_cyl + v_sph);
            let m_sph = mass - m_cyl;
            let across = m_cyl * (r * r / 4.0 + height * height / 12.0)
                + m_sph * (0.4 * r * r + height * height / 4.0 + 3.0 * height * r / 8.0);
            let along = m_cyl * r * r / 2.0 + m_sph * 0.4 * r * r;
            [across, across, along]
        }
        GeomType::Box => {
            let [a, b, c] = size.map(|h| h * h);
            [mass / 3.0 * (b + c), mass / 3.0 * (a + c), mass / 3.0 * (a + b)]
        }
    }
}

/// Total mass, centre of mass, inertia tensor about it, principal moments and the principal
/// axes' quaternion of a set of mass elements (zero mass gives zeros and the identity).
pub fn combine(elements: &[MassElement]) -> (f64, Vec3, Mat3, Vec3, [f64; 4]) {
    let mass: f64 = elements.iter().map(|e| e.mass).sum();
    if mass <= 0.0 {
        return (0.0, [0.0; 3], [[0.0; 3]; 3], [0.0; 3], [1.0, 0.0, 0.0, 0.0]);
    }
    let com = scale(elements.iter().fold([0.0; 3], |acc, e| add(acc, scale(e.com, e.mass))), 1.0 / mass);
    let mut inertia = [[0.0; 3]; 3];
    for e in elements {
        // Parallel-axis shift: I + m (|d|² E − d dᵀ).
        let d = sub(e.com, com);
        let shift = diag([dot(d, d); 3]);
        for i in 0..3 {
            for j in 0..3 {
                inertia[i][j] += e.inertia[i][j] + e.mass * (shift[i][j] - d[i] * d[j]);
            }
        }
    }
    let (moments, axes) = symmetric_eigen(inertia);
    (mass, com, inertia, moments, mat_to_quat(axes))
}
