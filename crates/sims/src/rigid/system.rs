//! [`System`]: a loaded MJCF model as structure-of-arrays (f64), in Brax's terms.

use std::collections::BTreeMap;

/// Kind of a joint. Brax models a ball joint as three hinges, so there is no `Ball`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JointType {
    /// 6 DoF (7 position coordinates: world position, then a w-x-y-z quaternion).
    Free,
    /// 1 rotational DoF about `axis`, in radians.
    Hinge,
    /// 1 translational DoF along `axis`, in metres.
    Slide,
}

impl JointType {
    /// Number of position coordinates (`q` entries): 7 for free, 1 otherwise.
    pub fn nq(self) -> usize {
        match self {
            JointType::Free => 7,
            JointType::Hinge | JointType::Slide => 1,
        }
    }

    /// Number of velocity coordinates (DoFs): 6 for free, 1 otherwise.
    pub fn nv(self) -> usize {
        match self {
            JointType::Free => 6,
            JointType::Hinge | JointType::Slide => 1,
        }
    }
}

/// Kind of a geom. `size` meanings: sphere `[radius, 0, 0]`; capsule `[radius, half-length, 0]`
/// (axis along the geom's local z); box `[half-x, half-y, half-z]`; plane `[half-x, half-y, grid]`
/// (normal along local z; extent is visual only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeomType {
    /// Infinite plane, normal local +z.
    Plane,
    /// Sphere.
    Sphere,
    /// Capsule (cylinder with hemispherical caps).
    Capsule,
    /// Box.
    Box,
}

/// Per-link arrays (one entry per MJCF body that has joints; the world body is not a link).
/// Jointless bodies are merged into their parent, as Brax does.
#[derive(Debug, Clone, Default)]
pub struct Links {
    /// Body names (empty string when unnamed).
    pub names: Vec<String>,
    /// Parent link index, `None` for children of the world.
    pub parents: Vec<Option<usize>>,
    /// Body frame position relative to the parent link's frame (m).
    pub pos: Vec<[f64; 3]>,
    /// Body frame orientation relative to the parent link's frame, unit quaternion w-x-y-z.
    pub quat: Vec<[f64; 4]>,
    /// Mass (kg): from `<inertial>` or from geoms (`density × volume`, or geom `mass`).
    pub mass: Vec<f64>,
    /// Centre of mass in the link frame (m).
    pub com: Vec<[f64; 3]>,
    /// Inertia tensor about the centre of mass, in link-frame axes (kg·m²).
    pub inertia: Vec<[[f64; 3]; 3]>,
    /// Principal moments of `inertia` (kg·m²), as MuJoCo's `body_inertia`.
    pub inertia_diag: Vec<[f64; 3]>,
    /// Orientation of the principal axes in the link frame (MuJoCo's `body_iquat`), w-x-y-z.
    pub inertia_quat: Vec<[f64; 4]>,
}

/// Per-joint arrays, in document order.
#[derive(Debug, Clone, Default)]
pub struct Joints {
    /// Joint names (empty string when unnamed).
    pub names: Vec<String>,
    /// Joint kinds.
    pub types: Vec<JointType>,
    /// The link each joint moves.
    pub link: Vec<usize>,
    /// Anchor in the link frame (m).
    pub pos: Vec<[f64; 3]>,
    /// Unit axis in the link frame (unused for free joints).
    pub axis: Vec<[f64; 3]>,
    /// Whether `range` is enforced.
    pub limited: Vec<bool>,
    /// `[lo, hi]`: radians for hinges, metres for slides; `[0, 0]` when not limited.
    pub range: Vec<[f64; 2]>,
    /// Spring stiffness (N·m/rad or N/m).
    pub stiffness: Vec<f64>,
    /// Viscous damping (N·m·s/rad or N·s/m).
    pub damping: Vec<f64>,
    /// Armature (added rotor inertia, kg·m² or kg).
    pub armature: Vec<f64>,
    /// Limit margin (MuJoCo `margin`).
    pub margin: Vec<f64>,
    /// Index of the joint's first entry in `q`.
    pub q_start: Vec<usize>,
    /// Index of the joint's first entry in `qd`.
    pub dof_start: Vec<usize>,
}

/// Per-geom arrays (world geoms included, with `link == None`).
#[derive(Debug, Clone, Default)]
pub struct Geoms {
    /// Geom names (empty string when unnamed).
    pub names: Vec<String>,
    /// Geom kinds.
    pub types: Vec<GeomType>,
    /// The link the geom is attached to; `None` for the world.
    pub link: Vec<Option<usize>>,
    /// Position in the link (or world) frame (m).
    pub pos: Vec<[f64; 3]>,
    /// Orientation in the link (or world) frame, w-x-y-z.
    pub quat: Vec<[f64; 4]>,
    /// Sizes; see [`GeomType`].
    pub size: Vec<[f64; 3]>,
    /// `[sliding, torsional, rolling]` friction coefficients.
    pub friction: Vec<[f64; 3]>,
    /// Contact type bitmask.
    pub contype: Vec<u32>,
    /// Contact affinity bitmask.
    pub conaffinity: Vec<u32>,
    /// Contact dimensionality (Brax supports 3).
    pub condim: Vec<u32>,
    /// MuJoCo `solref` (time constant s, damping ratio).
    pub solref: Vec<[f64; 2]>,
    /// MuJoCo `solimp` (dmin, dmax, width m, midpoint, power).
    pub solimp: Vec<[f64; 5]>,
    /// Contact margin (m).
    pub margin: Vec<f64>,
    /// The geom's own mass (kg), 0 for planes.
    pub mass: Vec<f64>,
}

/// Per-actuator arrays (`<motor>`s, joint transmission), in document order.
#[derive(Debug, Clone, Default)]
pub struct Actuators {
    /// Actuator names (empty string when unnamed).
    pub names: Vec<String>,
    /// The driven joint.
    pub joint: Vec<usize>,
    /// Gear ratio: force/torque = gear × ctrl.
    pub gear: Vec<f64>,
    /// Whether `ctrl_range` clips the control.
    pub ctrl_limited: Vec<bool>,
    /// `[lo, hi]` control range.
    pub ctrl_range: Vec<[f64; 2]>,
    /// Whether `force_range` clips the force.
    pub force_limited: Vec<bool>,
    /// `[lo, hi]` force range.
    pub force_range: Vec<[f64; 2]>,
}

/// A rigid-body model loaded from MJCF: every quantity as f64 structure-of-arrays, ready to become
/// kiln tensors. Angles are radians, quaternions w-x-y-z, units SI.
///
/// ```
/// let sys = kiln_sims::rigid::System::from_mjcf_str(
///     "doc",
///     r#"<mujoco><option timestep="0.01"/><worldbody>
///          <body name="ball" pos="0 0 1"><joint type="free"/><geom type="sphere" size="0.1"/></body>
///        </worldbody></mujoco>"#,
/// )?;
/// assert_eq!(sys.link_types(), "f");
/// // density 1000 × 4/3·π·0.1³ = 4.18879 kg
/// assert!((sys.links.mass[0] - 4.188790204786391).abs() < 1e-12);
/// assert_eq!(sys.init_q, vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
/// # Ok::<(), kiln_sims::rigid::MjcfError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct System {
    /// `<mujoco model=...>`.
    pub model_name: String,
    /// `<option timestep>` (s); MuJoCo's default 0.002.
    pub timestep: f64,
    /// `<option gravity>` (m/s²); default `[0, 0, -9.81]`.
    pub gravity: [f64; 3],
    /// `<option iterations>`; default 100.
    pub solver_iterations: usize,
    /// Links (bodies with joints).
    pub links: Links,
    /// Joints.
    pub joints: Joints,
    /// Geoms.
    pub geoms: Geoms,
    /// Actuators.
    pub actuators: Actuators,
    /// Brax's `<custom><numeric name=... data=...>` values, by name, as written.
    pub custom: BTreeMap<String, Vec<f64>>,
    /// Initial generalized position (length `nq`): `<numeric name="init_qpos">` if present,
    /// otherwise MuJoCo's `qpos0` (free joints at the body's world pose, others 0).
    pub init_q: Vec<f64>,
    /// Number of position coordinates.
    pub nq: usize,
    /// Number of velocity coordinates (DoFs).
    pub nv: usize,
}

impl System {
    /// Brax's `link_types`: per link, `f` for a free joint, else the number of hinge/slide joints.
    pub fn link_types(&self) -> String {
        (0..self.links.names.len())
            .map(|link| {
                let joints: Vec<JointType> = (0..self.joints.link.len())
                    .filter(|&j| self.joints.link[j] == link)
                    .map(|j| self.joints.types[j])
                    .collect();
                if joints.contains(&JointType::Free) {
                    'f'
                } else {
                    char::from_digit(joints.len() as u32, 10).unwrap_or('?')
                }
            })
            .collect()
    }

    /// A custom numeric value by name, e.g. `constraint_stiffness`.
    pub fn custom_value(&self, name: &str) -> Option<&[f64]> {
        self.custom.get(name).map(Vec::as_slice)
    }
}
