//! [`Model`]: a [`System`] as kiln tensors of one float dtype, laid out as Brax's `System` (link,
//! dof and actuator arrays, the `<custom>` spring constants), plus the static [`Structure`] (tree,
//! joint kinds, axes) that fixes the traced program.
//!
//! The tensors are a pytree, so a `Model` can be a `jit` argument and the gradient of a rollout can
//! be taken with respect to masses, stiffnesses or gravity. Joint axes, parents and index layouts
//! are static: they choose which ops are traced, as Brax's `link_types` and `dof.motion` do.

use super::system::{GeomType, JointType, System};
use kiln::prelude::*;
use thiserror::Error;

/// A [`System`] the rigid pipelines cannot run.
#[derive(Debug, Error, PartialEq)]
pub enum ModelError {
    /// A link whose joints kiln cannot run: a stack of joints that are not all slides (Brax's
    /// rotational and mixed link types `2`, `3`: not implemented in kiln yet), more than three
    /// joints, a free joint stacked with others, or stacked joints at different anchors (Brax
    /// rejects the last two as well).
    #[error(
        "link `{link}` has {joints} joints; kiln's rigid pipelines support one hinge/slide, one free joint, or a stack of 2 or 3 slides sharing one anchor per link"
    )]
    JointStack {
        /// The link's body name.
        link: String,
        /// How many joints it has.
        joints: usize,
    },
    /// A `<custom><numeric>` value with a length Brax would reject.
    #[error("custom value `{name}` has {got} numbers; expected {}", expected_counts(.expected, .per))]
    CustomSize {
        /// The numeric's name.
        name: String,
        /// Numbers given.
        got: usize,
        /// Numbers needed.
        expected: usize,
        /// `body` or `geom`.
        per: &'static str,
    },
    /// A pair of colliding geoms whose contact kiln's pipelines do not compute yet.
    #[error(
        "geoms `{geom1}` ({type1:?}) and `{geom2}` ({type2:?}) collide, but kiln's rigid contacts (spring and positional) support only plane–sphere and plane–capsule"
    )]
    UnsupportedContact {
        /// First geom's name (or index).
        geom1: String,
        /// Its type.
        type1: GeomType,
        /// Second geom's name (or index).
        geom2: String,
        /// Its type.
        type2: GeomType,
    },
    /// The requested dtype is not a float dtype.
    #[error("rigid models need a float dtype (f32 or f64), not {0}")]
    NotFloat(DType),
    /// The model has no moving body (no `<body>` with a joint): there is nothing to simulate.
    #[error("the model has no moving body (a <body> with a joint); kiln's rigid pipelines need at least one")]
    NoLinks,
    /// A `<custom><numeric>` value outside the range Brax accepts.
    #[error("custom value `{name}` = {value} is outside {range} (Brax rejects it)")]
    CustomRange {
        /// The numeric's name.
        name: String,
        /// The value given.
        value: f64,
        /// The accepted range, e.g. `[0, 1]`.
        range: &'static str,
    },
}

/// "1 or N (one per body)", or "1" when one number is all there can be.
fn expected_counts(expected: &usize, per: &str) -> String {
    if *expected == 1 { "1".to_string() } else { format!("1 or {expected} (one per {per})") }
}

/// A 1-DoF joint (hinge or slide), with the frames Brax derives from its axis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OneDof {
    /// Index of the DoF in `qd` (and of the coordinate in `q`, which is `q_index`).
    pub dof: usize,
    /// Index of the coordinate in `q`.
    pub q_index: usize,
    /// Brax `dof.motion.ang`: the hinge axis, or 0 for a slide.
    pub motion_ang: [f64; 3],
    /// Brax `dof.motion.vel`: the slide axis, or 0 for a hinge.
    pub motion_vel: [f64; 3],
    /// Brax `link_to_joint_frame(motion).ang`: rows `[axis, ortho₁, ortho₂]` (identity for a slide).
    pub frame_ang: [[f64; 3]; 3],
    /// The same for the slide axis (identity for a hinge).
    pub frame_vel: [[f64; 3]; 3],
}

impl OneDof {
    /// True for a hinge (Brax `motion.ang.any()`).
    pub fn is_rotational(&self) -> bool {
        self.motion_ang.iter().any(|&v| v != 0.0)
    }

    /// True for a slide (Brax `motion.vel.any()`).
    pub fn is_translational(&self) -> bool {
        self.motion_vel.iter().any(|&v| v != 0.0)
    }
}

/// Two or three slide joints on one link (Brax link type `2` or `3` with translational DoFs only,
/// e.g. reacher's target). Brax `jcalc` composes them one DoF at a time; with identity rotations
/// that is `pos = Σₖ axisₖ qₖ`, `vel = Σₖ axisₖ q̇ₖ`, no rotation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlideStack {
    /// Number of slides (2 or 3).
    pub count: usize,
    /// DoF index in `qd` of each slide (entries past `count` repeat the first; unused).
    pub dofs: [usize; 3],
    /// Coordinate index in `q` of each slide (likewise).
    pub q_index: [usize; 3],
    /// Brax `dof.motion.vel` of each slide: its unit axis in the link frame (zero past `count`,
    /// which is Brax's `_sphericalize` padding).
    pub axes: [[f64; 3]; 3],
}

/// How a link moves relative to its parent (Brax `link_types`: `f`, `1`, or `2`/`3` of slides).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LinkKind {
    /// A free joint: 7 coordinates (world position, w-x-y-z quaternion) and 6 DoFs (linear, then
    /// angular velocity in the link frame); `q_index`/`dof` are the first entries.
    Free {
        /// First `q` entry.
        q_index: usize,
        /// First `qd` entry.
        dof: usize,
    },
    /// One hinge or slide.
    OneDof(OneDof),
    /// Two or three slides.
    Slides(SlideStack),
}

/// One contact row between a plane and a sphere (or one end of a capsule), as MJX's colliders make
/// them (plane first): the row's point is on the sphere centre, or at `end · half-length` along the
/// capsule axis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContactRow {
    /// The plane geom.
    pub plane: usize,
    /// The sphere or capsule geom.
    pub other: usize,
    /// 0 for a sphere; +1 or −1 for a capsule's end caps (MJX's order: +1 first).
    pub end: f64,
    /// The plane's link (`None`: the world).
    pub link1: Option<usize>,
    /// The other geom's link.
    pub link2: Option<usize>,
}

/// The static part of a [`Model`]: everything that changes the traced program rather than its
/// numbers.
#[derive(Debug, Clone)]
pub struct Structure {
    /// The float dtype of every tensor of the model and of the states stepped with it.
    pub dtype: DType,
    /// Physics timestep (s) of one pipeline step.
    pub timestep: f64,
    /// Parent link of each link (`None` for children of the world).
    pub parents: Vec<Option<usize>>,
    /// Joint kind of each link.
    pub kinds: Vec<LinkKind>,
    /// Number of position coordinates.
    pub nq: usize,
    /// Number of DoFs.
    pub nv: usize,
    /// The DoF each actuator drives.
    pub actuator_dofs: Vec<usize>,
    /// Whether any joint is limited (Brax passes `dof.limit = None` otherwise).
    pub any_limited: bool,
    /// Link names, for messages.
    pub link_names: Vec<String>,
    /// The link of each geom (`None`: the world).
    pub geom_links: Vec<Option<usize>>,
    /// The contact rows, in MJX's order of geom pairs.
    pub contacts: Vec<ContactRow>,
    /// Read each contact body's inverse inertia as Brax 0.14 does, from the flattened
    /// `[L, 3, 3]` array (a scalar per body; see `spring::collisions`). `true` by default, which
    /// reproduces Brax's trajectories; `false` uses the full matrix.
    pub brax_contact_inertia: bool,
    /// Width (m) of a smooth contact onset for gradient work, or `None` (default: Brax's hard gate;
    /// see `spring::collisions` and `positional::collisions`).
    pub contact_smoothing: Option<f64>,
}

impl Structure {
    /// Number of links.
    pub fn num_links(&self) -> usize {
        self.parents.len()
    }
}

/// A [`System`] as tensors (dtype [`Structure::dtype`]); `L` links, `nv` DoFs, `nu` actuators.
/// Masses and inertias are the loader's (MuJoCo's); the spring and positional pipelines rescale them with
/// `spring_mass_scale`/`spring_inertia_scale` as Brax does.
#[derive(Tree, Clone, Debug)]
pub struct Model {
    /// `[L, 3]` link frame position in the parent link's frame (m); 0 for free links (MuJoCo keeps
    /// a free body's pose in `q`, so Brax clears it).
    pub link_pos: Tensor,
    /// `[L, 4]` link frame orientation in the parent link's frame (identity for free links).
    pub link_rot: Tensor,
    /// `[L, 3]` joint anchor in the link frame (m) (Brax `link.joint.pos`).
    pub joint_pos: Tensor,
    /// `[L, 3]` centre of mass in the link frame (m) (MuJoCo `body_ipos`).
    pub com: Tensor,
    /// `[L, 4]` principal axes of inertia in the link frame (MuJoCo `body_iquat`).
    pub inertia_rot: Tensor,
    /// `[L, 3]` principal moments of inertia (kg·m²).
    pub inertia_diag: Tensor,
    /// `[L]` mass (kg).
    pub mass: Tensor,
    /// `[L]` Brax `constraint_stiffness` (default 2000).
    pub constraint_stiffness: Tensor,
    /// `[L]` Brax `constraint_vel_damping` (default 0).
    pub constraint_vel_damping: Tensor,
    /// `[L]` Brax `constraint_limit_stiffness` (default 1000).
    pub constraint_limit_stiffness: Tensor,
    /// `[L]` Brax `constraint_ang_damping` (default 0).
    pub constraint_ang_damping: Tensor,
    /// `[3]` gravity (m/s²).
    pub gravity: Tensor,
    /// `[nv]` lower joint limit per DoF (rad or m); `-inf` when unlimited.
    pub limit_lo: Tensor,
    /// `[nv]` upper joint limit per DoF; `+inf` when unlimited.
    pub limit_hi: Tensor,
    /// `[nu]` actuator gear.
    pub gear: Tensor,
    /// `[nu]` lower control limit; `-inf` when not `ctrllimited`.
    pub ctrl_lo: Tensor,
    /// `[nu]` upper control limit; `+inf` when not `ctrllimited`.
    pub ctrl_hi: Tensor,
    /// `[nu]` lower force limit; `-inf` when not `forcelimited`.
    pub force_lo: Tensor,
    /// `[nu]` upper force limit; `+inf` when not `forcelimited`.
    pub force_hi: Tensor,
    /// `[]` Brax `spring_mass_scale`: the spring pipeline uses `mass^(1 − scale)`.
    pub spring_mass_scale: Tensor,
    /// `[]` Brax `spring_inertia_scale`: the spring pipeline uses `inertia^(1 − scale)`.
    pub spring_inertia_scale: Tensor,
    /// `[]` Brax `vel_damping` (1/s): velocities are scaled by `exp(vel_damping · dt)` each step.
    pub vel_damping: Tensor,
    /// `[]` Brax `ang_damping` (1/s), likewise for angular velocities.
    pub ang_damping: Tensor,
    /// `[]` Brax `baumgarte_erp` (default 0.1): contact position correction per step.
    pub baumgarte_erp: Tensor,
    /// `[]` Brax `joint_scale_pos` (default 0.5): share of a joint's position error the positional
    /// pipeline corrects per step.
    pub joint_scale_pos: Tensor,
    /// `[]` Brax `joint_scale_ang` (default 0.2): the same for a joint's orientation error.
    pub joint_scale_ang: Tensor,
    /// `[]` Brax `collide_scale` (default 1): scales the positional pipeline's contact corrections.
    pub collide_scale: Tensor,
    /// `[G, 3]` geom position in its link (or world) frame (m).
    pub geom_pos: Tensor,
    /// `[G, 4]` geom orientation in its link (or world) frame.
    pub geom_rot: Tensor,
    /// `[G, 3]` geom sizes (see [`GeomType`]).
    pub geom_size: Tensor,
    /// `[G]` sliding friction coefficient.
    pub geom_friction: Tensor,
    /// `[G]` Brax `elasticity` (restitution, default 0).
    pub elasticity: Tensor,
    /// The static structure.
    #[tree(skip)]
    pub structure: Structure,
}

/// A constant tensor of `dtype` (f32 values are the f64 ones rounded, as numpy's `astype`).
pub(crate) fn constant(dtype: DType, shape: &[usize], data: &[f64]) -> Tensor {
    match dtype {
        DType::F32 => Tensor::from_vec(shape, data.iter().map(|&v| v as f32).collect()),
        _ => Tensor::from_vec(shape, data.to_vec()),
    }
}

/// Brax `math.orthogonals` in f64: two unit vectors completing `a` to a right-handed frame
/// (zeros for a zero `a`).
fn orthogonals(a: [f64; 3]) -> ([f64; 3], [f64; 3]) {
    use super::math::{cross, dot, normalize, scale, sub};
    let b0 = if -0.5 < a[1] && a[1] < 0.5 { [0.0, 1.0, 0.0] } else { [0.0, 0.0, 1.0] };
    let b = sub(b0, scale(a, dot(a, b0)));
    let any = if a.iter().any(|&v| v != 0.0) { 1.0 } else { 0.0 };
    let b = scale(normalize(b), any);
    (b, cross(a, b))
}

/// Brax `kinematics.link_to_joint_frame` for one DoF: `[axis, ortho₁, ortho₂]`, or the identity
/// when the axis is zero.
fn joint_frame(axis: [f64; 3]) -> [[f64; 3]; 3] {
    if axis.iter().any(|&v| v != 0.0) {
        let (b, c) = orthogonals(axis);
        [axis, b, c]
    } else {
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    }
}

/// MuJoCo's (and MJX's) candidate geom pairs: the collision masks match
/// (`contype₁ & conaffinity₂ | contype₂ & conaffinity₁`), the geoms are on different links, and
/// neither link is the other's parent (the world is exempt from that filter). Each plane–sphere pair
/// gives one row, each plane–capsule pair two.
fn contact_rows(sys: &System) -> Result<Vec<ContactRow>, ModelError> {
    let g = &sys.geoms;
    let parent = |l: Option<usize>| l.and_then(|l| sys.links.parents[l]);
    let mut rows = Vec::new();
    for a in 0..g.types.len() {
        for b in a + 1..g.types.len() {
            let masks = (g.contype[a] & g.conaffinity[b]) | (g.contype[b] & g.conaffinity[a]);
            let (la, lb) = (g.link[a], g.link[b]);
            let welded = la == lb;
            let parent_child = la.is_some() && lb.is_some() && (parent(la) == lb || parent(lb) == la);
            if masks == 0 || welded || parent_child {
                continue;
            }
            let (plane, other) = if g.types[a] == GeomType::Plane { (a, b) } else { (b, a) };
            let ends: &[f64] = match (g.types[plane], g.types[other]) {
                (GeomType::Plane, GeomType::Sphere) => &[0.0],
                (GeomType::Plane, GeomType::Capsule) => &[1.0, -1.0],
                (t1, t2) => {
                    let name =
                        |i: usize| if g.names[i].is_empty() { format!("#{i}") } else { g.names[i].clone() };
                    return Err(ModelError::UnsupportedContact {
                        geom1: name(plane),
                        type1: t1,
                        geom2: name(other),
                        type2: t2,
                    });
                }
            };
            for &end in ends {
                rows.push(ContactRow { plane, other, end, link1: g.link[plane], link2: g.link[other] });
            }
        }
    }
    Ok(rows)
}

impl Model {
    /// Builds the tensors of `sys` in `dtype` (f32 or f64). Errors: [`ModelError`] for no moving
    /// body, links with several joints other than a stack of 2 or 3 slides at one anchor, custom
    /// values of the wrong length or (spring scales) outside `[0, 1]`, colliding geom pairs other
    /// than plane–sphere and plane–capsule, or a non-float dtype.
    pub fn new(sys: &System, dtype: DType) -> Result<Model, ModelError> {
        if !matches!(dtype, DType::F32 | DType::F64) {
            return Err(ModelError::NotFloat(dtype));
        }
        let num_links = sys.links.names.len();
        if num_links == 0 {
            return Err(ModelError::NoLinks);
        }
        let mut kinds = Vec::with_capacity(num_links);
        let mut joint_pos = Vec::with_capacity(num_links);
        for link in 0..num_links {
            let joints: Vec<usize> =
                (0..sys.joints.link.len()).filter(|&j| sys.joints.link[j] == link).collect();
            // An unnamed body is named by its link index, as unnamed geoms are.
            let link_name = if sys.links.names[link].is_empty() {
                format!("#{link}")
            } else {
                sys.links.names[link].clone()
            };
            let stack_error = || ModelError::JointStack { link: link_name.clone(), joints: joints.len() };
            if let [first, ..] = joints[..]
                && joints.len() > 1
            {
                // Brax `mjcf.load_model`: a stack shares the first joint's anchor (it rejects others).
                let slides = joints.iter().all(|&j| sys.joints.types[j] == JointType::Slide);
                let one_anchor = joints.iter().all(|&j| sys.joints.pos[j] == sys.joints.pos[first]);
                if !slides || joints.len() > 3 || !one_anchor {
                    return Err(stack_error());
                }
                let pick = |k: usize| joints[k.min(joints.len() - 1)];
                let mut axes = [[0.0; 3]; 3];
                for (k, &j) in joints.iter().enumerate() {
                    axes[k] = sys.joints.axis[j];
                }
                kinds.push(LinkKind::Slides(SlideStack {
                    count: joints.len(),
                    dofs: [0, 1, 2].map(|k| sys.joints.dof_start[pick(k)]),
                    q_index: [0, 1, 2].map(|k| sys.joints.q_start[pick(k)]),
                    axes,
                }));
                joint_pos.extend(sys.joints.pos[first]);
                continue;
            }
            let [j] = joints[..] else {
                return Err(stack_error());
            };
            let (q_index, dof) = (sys.joints.q_start[j], sys.joints.dof_start[j]);
            let axis = sys.joints.axis[j];
            kinds.push(match sys.joints.types[j] {
                JointType::Free => LinkKind::Free { q_index, dof },
                JointType::Hinge | JointType::Slide => {
                    let hinge = sys.joints.types[j] == JointType::Hinge;
                    let (motion_ang, motion_vel) = if hinge { (axis, [0.0; 3]) } else { ([0.0; 3], axis) };
                    LinkKind::OneDof(OneDof {
                        dof,
                        q_index,
                        motion_ang,
                        motion_vel,
                        frame_ang: joint_frame(motion_ang),
                        frame_vel: joint_frame(motion_vel),
                    })
                }
            });
            joint_pos.extend(sys.joints.pos[j]);
        }
        let free = |l: usize| matches!(kinds[l], LinkKind::Free { .. });
        let (mut link_pos, mut link_rot) = (Vec::new(), Vec::new());
        for l in 0..num_links {
            link_pos.extend(if free(l) { [0.0; 3] } else { sys.links.pos[l] });
            link_rot.extend(if free(l) { [1.0, 0.0, 0.0, 0.0] } else { sys.links.quat[l] });
        }
        let inf = f64::INFINITY;
        let (mut limit_lo, mut limit_hi) = (vec![-inf; sys.nv], vec![inf; sys.nv]);
        for j in 0..sys.joints.types.len() {
            if sys.joints.limited[j] && sys.joints.types[j] != JointType::Free {
                limit_lo[sys.joints.dof_start[j]] = sys.joints.range[j][0];
                limit_hi[sys.joints.dof_start[j]] = sys.joints.range[j][1];
            }
        }
        let a = &sys.actuators;
        let nu = a.joint.len();
        let range = |limited: &[bool], r: &[[f64; 2]], k: usize| -> Vec<f64> {
            (0..nu)
                .map(|i| {
                    if limited[i] {
                        r[i][k]
                    } else if k == 0 {
                        -inf
                    } else {
                        inf
                    }
                })
                .collect()
        };
        let per_link = |name: &str, default: f64| -> Result<Vec<f64>, ModelError> {
            match sys.custom_value(name) {
                None => Ok(vec![default; num_links]),
                Some([v]) => Ok(vec![*v; num_links]),
                Some(v) if v.len() == num_links => Ok(v.to_vec()),
                Some(v) => Err(ModelError::CustomSize {
                    name: name.into(),
                    got: v.len(),
                    expected: num_links,
                    per: "body",
                }),
            }
        };
        // Brax `mjcf.load_model`: a global custom value has exactly one number.
        let scalar = |name: &str, default: f64| -> Result<f64, ModelError> {
            match sys.custom_value(name) {
                None => Ok(default),
                Some([v]) => Ok(*v),
                Some(v) => {
                    Err(ModelError::CustomSize { name: name.into(), got: v.len(), expected: 1, per: "model" })
                }
            }
        };
        // Brax: "Spring inertia and mass scale must be in [0, 1]".
        let unit_scalar = |name: &str| -> Result<f64, ModelError> {
            let value = scalar(name, 0.0)?;
            if (0.0..=1.0).contains(&value) {
                Ok(value)
            } else {
                Err(ModelError::CustomRange { name: name.into(), value, range: "[0, 1]" })
            }
        };
        let c = |shape: &[usize], data: &[f64]| constant(dtype, shape, data);
        let flat3 = |rows: &[[f64; 3]]| rows.concat();
        let flat4 = |rows: &[[f64; 4]]| rows.concat();
        let contacts = contact_rows(sys)?;
        let ng = sys.geoms.types.len();
        let elasticity = match sys.custom_value("elasticity") {
            None => vec![0.0; ng],
            Some([v]) => vec![*v; ng],
            Some(v) if v.len() == ng => v.to_vec(),
            Some(v) => {
                return Err(ModelError::CustomSize {
                    name: "elasticity".into(),
                    got: v.len(),
                    expected: ng,
                    per: "geom",
                });
            }
        };
        let l = num_links;
        Ok(Model {
            link_pos: c(&[l, 3], &link_pos),
            link_rot: c(&[l, 4], &link_rot),
            joint_pos: c(&[l, 3], &joint_pos),
            com: c(&[l, 3], &flat3(&sys.links.com)),
            inertia_rot: c(&[l, 4], &flat4(&sys.links.inertia_quat)),
            inertia_diag: c(&[l, 3], &flat3(&sys.links.inertia_diag)),
            mass: c(&[l], &sys.links.mass),
            constraint_stiffness: c(&[l], &per_link("constraint_stiffness", 2000.0)?),
            constraint_vel_damping: c(&[l], &per_link("constraint_vel_damping", 0.0)?),
            constraint_limit_stiffness: c(&[l], &per_link("constraint_limit_stiffness", 1000.0)?),
            constraint_ang_damping: c(&[l], &per_link("constraint_ang_damping", 0.0)?),
            gravity: c(&[3], &sys.gravity),
            limit_lo: c(&[sys.nv], &limit_lo),
            limit_hi: c(&[sys.nv], &limit_hi),
            gear: c(&[nu], &a.gear),
            ctrl_lo: c(&[nu], &range(&a.ctrl_limited, &a.ctrl_range, 0)),
            ctrl_hi: c(&[nu], &range(&a.ctrl_limited, &a.ctrl_range, 1)),
            force_lo: c(&[nu], &range(&a.force_limited, &a.force_range, 0)),
            force_hi: c(&[nu], &range(&a.force_limited, &a.force_range, 1)),
            spring_mass_scale: c(&[], &[unit_scalar("spring_mass_scale")?]),
            spring_inertia_scale: c(&[], &[unit_scalar("spring_inertia_scale")?]),
            vel_damping: c(&[], &[scalar("vel_damping", 0.0)?]),
            ang_damping: c(&[], &[scalar("ang_damping", 0.0)?]),
            baumgarte_erp: c(&[], &[scalar("baumgarte_erp", 0.1)?]),
            joint_scale_pos: c(&[], &[scalar("joint_scale_pos", 0.5)?]),
            joint_scale_ang: c(&[], &[scalar("joint_scale_ang", 0.2)?]),
            collide_scale: c(&[], &[scalar("collide_scale", 1.0)?]),
            geom_pos: c(&[ng, 3], &flat3(&sys.geoms.pos)),
            geom_rot: c(&[ng, 4], &flat4(&sys.geoms.quat)),
            geom_size: c(&[ng, 3], &flat3(&sys.geoms.size)),
            geom_friction: c(&[ng], &sys.geoms.friction.iter().map(|f| f[0]).collect::<Vec<_>>()),
            elasticity: c(&[ng], &elasticity),
            structure: Structure {
                dtype,
                timestep: sys.timestep,
                parents: sys.links.parents.clone(),
                kinds,
                nq: sys.nq,
                nv: sys.nv,
                actuator_dofs: a.joint.iter().map(|&j| sys.joints.dof_start[j]).collect(),
                any_limited: sys.joints.limited.iter().any(|&b| b),
                link_names: sys.links.names.clone(),
                geom_links: sys.geoms.link.clone(),
                contacts,
                brax_contact_inertia: true,
                contact_smoothing: None,
            },
        })
    }

    /// The same model with another physics timestep (s): Brax's environments override the file's
    /// (the inverted pendulum runs the spring pipeline at 0.005 s × 4 substeps).
    pub fn with_timestep(mut self, timestep: f64) -> Model {
        self.structure.timestep = timestep;
        self
    }

    /// The model's float dtype.
    pub fn dtype(&self) -> DType {
        self.structure.dtype
    }

    /// A constant of the model's dtype.
    pub(crate) fn constant(&self, shape: &[usize], data: &[f64]) -> Tensor {
        constant(self.dtype(), shape, data)
    }
}
