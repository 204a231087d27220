//! Brax-style rigid bodies. Phase 1: the MJCF loader and [`System`].
//!
//! [`System::from_mjcf_file`] reads the MJCF subset Brax supports:
//! - `<compiler angle coordinate="local" inertiafromgeom>` (angles default to degrees, as in MuJoCo);
//! - `<option timestep gravity iterations integrator="Euler">`;
//! - `<default>` classes (nested, with `class` and body `childclass`) for `joint`, `geom`, `motor`;
//! - the `<worldbody>` tree: `body` (`pos`, `quat`/`euler`/`axisangle`), `joint` (hinge, slide,
//!   free; `range`, `limited`, `stiffness`, `damping`, `armature`, `margin`), `freejoint`,
//!   `inertial`, `geom` (plane, sphere, capsule with `fromto`, box; `friction`, `contype`,
//!   `conaffinity`, `condim`, `solref`, `solimp`, `margin`, `density` (default 1000), `mass`,
//!   `group`: as in MuJoCo, a geom outside groups 0 to 5 adds no mass or inertia);
//! - `<actuator><motor joint gear ctrlrange ctrllimited forcerange forcelimited>`;
//! - Brax's `<custom><numeric name data>` values (kept by name; `init_qpos` sets [`System::init_q`]);
//! - `<statistic>` (rendering metadata: checked as MuJoCo checks it, then unused).
//!
//! Bodies without joints are merged into their parent (their geoms, mass and children move into
//! the parent's frame), as Brax does. Mass and inertia come from geoms (`density × volume`, or the
//! geom's `mass`) or from `<inertial>`, following `inertiafromgeom`.
//!
//! Ignored, with everything inside them (rendering and memory only), each only where MuJoCo's schema
//! allows it: see [`IGNORED_ELEMENTS`] (`asset`, `size`, `visual` in `<mujoco>`; `light`, `camera`,
//! `site` in bodies; `texture`, `material`, `light`, `camera`, `site` in `<default>`), an empty
//! `<tendon/>`, and the geom attributes `rgba`, `material`. Anything else (also `<contact>`,
//! `<equality>`, `<keyframe>`, `<sensor>`), and ball joints (Brax rejects them), is an [`MjcfError`]
//! naming the file, line and element.
//!
//! These models, which MuJoCo's compiler rejects, are rejected too ([`MjcfErrorKind::Invalid`]),
//! rather than simulated with different physics: a geom size its type uses that is not positive, a negative
//! mass or density, a moving body whose mass or a principal inertia is not above `mjMINVAL`
//! (1e-15), a free joint on a body that is not a child of the world body (also inside a static
//! body), a plane on a moving body, a zero quaternion, `condim` other than 1, 3, 4, 6, a repeated
//! name among default classes, bodies (the world body is `world`), joints, geoms or actuators, an
//! empty nested class name, a top-level default class named other than `main` (`class=""` is
//! `main`), a `<statistic extent>` that is not positive, non-finite numbers, and
//! `limited`/`ctrllimited`/`forcelimited="true"` without a range with `range[0] < range[1]`. As in
//! MuJoCo, `"auto"` (the default) limits when such a range is given (`0 0` or a backwards range
//! leaves it unlimited), and an orientation written on an element replaces its class's.

pub mod apg;
pub mod envs;
mod error;
mod inertia;
pub mod kinematics;
mod math;
mod mjcf;
mod model;
pub mod policy;
pub mod positional;
pub mod quat;
pub mod rollout;
pub mod spring;
mod state;
mod system;
pub mod wrappers;

pub use error::{MjcfError, MjcfErrorKind};
pub use mjcf::IGNORED_ELEMENTS;
pub use model::{ContactRow, LinkKind, Model, ModelError, OneDof, SlideStack, Structure};
pub use state::{Motion, State, Transform};
pub use system::{Actuators, GeomType, Geoms, JointType, Joints, Links, System};

impl System {
    /// Loads an MJCF file. Errors: [`MjcfError`] naming `path`, the line and the element.
    pub fn from_mjcf_file(path: impl AsRef<std::path::Path>) -> Result<System, MjcfError> {
        let path = path.as_ref();
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| MjcfError {
            file: file.clone(),
            line: 0,
            element: String::new(),
            kind: MjcfErrorKind::Io(e),
        })?;
        mjcf::parse(&file, &text)
    }

    /// Loads MJCF text; `name` stands for the file in error messages.
    pub fn from_mjcf_str(name: &str, text: &str) -> Result<System, MjcfError> {
        mjcf::parse(name, text)
    }
}
