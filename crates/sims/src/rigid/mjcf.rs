//! The MJCF parser (roxmltree): elements and attributes of Brax's subset, `<default>` classes,
//! jointless-body merging, geom-derived inertia.

use std::collections::{BTreeMap, HashMap, HashSet};

use roxmltree::{Document, Node};

use super::error::{MjcfError, MjcfErrorKind};
use super::inertia::{MassElement, combine, principal_inertia, volume};
use super::math::{
    QUAT_IDENTITY, Quat, Vec3, add, norm, normalize, quat_from_axis_angle, quat_from_euler_xyz, quat_mul,
    quat_normalize, quat_z_to, rotate, rotate_inertia, scale, sub,
};
use super::system::{GeomType, JointType, System};

/// Children of `<mujoco>` skipped with everything inside them: they only affect rendering
/// (`asset`, `visual`) or MuJoCo's memory (`size`). Also skipped: `light`, `camera` and `site` in
/// the world body and in bodies, and `texture`, `material`, `light`, `camera` and `site` in
/// `<default>` (rendering only), each only where MuJoCo's schema allows it.
pub const IGNORED_ELEMENTS: &[&str] = &["asset", "size", "visual"];

/// Children of the world body and of bodies skipped with everything inside them: rendering only.
const IGNORED_IN_BODY: &[&str] = &["light", "camera", "site"];

/// Children of `<default>` skipped: defaults for rendering elements only.
const IGNORED_IN_DEFAULT: &[&str] = &["texture", "material", "light", "camera", "site"];

/// Attributes skipped on geoms: rendering only. (`group` is read: MuJoCo leaves geoms outside
/// groups 0 to 5 out of the body's mass and inertia.)
const GEOM_VISUAL_ATTRS: &[&str] = &["rgba", "material"];

/// The geom groups whose geoms give a body mass and inertia: MuJoCo's default
/// `<compiler inertiagrouprange="0 5">` (kiln does not read `inertiagrouprange`).
const INERTIA_GROUPS: std::ops::RangeInclusive<i32> = 0..=5;

/// `<statistic>`'s attributes: metadata for rendering (MuJoCo 4.0.1: `meaninertia` "does not
/// affect simulation").
const STATISTIC_ATTRS: &[&str] = &["meaninertia", "meanmass", "meansize", "extent", "center"];

const JOINT_ATTRS: &[&str] = &[
    "name",
    "class",
    "type",
    "pos",
    "axis",
    "range",
    "limited",
    "stiffness",
    "damping",
    "armature",
    "margin",
];
const GEOM_ATTRS: &[&str] = &[
    "name",
    "class",
    "type",
    "pos",
    "quat",
    "euler",
    "axisangle",
    "size",
    "fromto",
    "friction",
    "contype",
    "conaffinity",
    "condim",
    "density",
    "mass",
    "solref",
    "solimp",
    "margin",
    "group",
];
const MOTOR_ATTRS: &[&str] =
    &["name", "class", "joint", "gear", "ctrlrange", "ctrllimited", "forcerange", "forcelimited"];

type Result<T> = std::result::Result<T, MjcfError>;

/// MuJoCo's `mjMINVAL`: a moving body's mass and principal inertias must exceed it.
const MIN_VALUE: f64 = 1e-15;

/// Deepest body nesting the loader follows. It recurses per level, and 6000 levels overflowed the
/// stack and aborted the process; 256 fit a default 2 MiB thread stack in a debug build (tested),
/// far past real models (Brax's and MuJoCo's nest fewer than 20).
const MAX_BODY_DEPTH: usize = 256;

/// An attribute value and the line it was written on (its own element, or a `<default>`).
type AttrMap = BTreeMap<String, (String, u32)>;

#[derive(Debug, Clone, Default)]
struct ClassDefaults {
    joint: AttrMap,
    geom: AttrMap,
    motor: AttrMap,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum InertiaFromGeom {
    True,
    False,
    Auto,
}

/// A pose: position and orientation of a frame in an outer frame.
type Pose = (Vec3, Quat);

fn compose(outer: Pose, inner: Pose) -> Pose {
    (add(outer.0, rotate(outer.1, inner.0)), quat_normalize(quat_mul(outer.1, inner.1)))
}

fn elements<'a, 'i>(node: Node<'a, 'i>) -> impl Iterator<Item = Node<'a, 'i>> {
    node.children().filter(Node::is_element)
}

/// Parses `text` (an MJCF document) into a [`System`]; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<System> {
    let doc = Document::parse(text).map_err(|e| MjcfError {
        file: file.to_string(),
        line: e.pos().row,
        element: String::new(),
        kind: MjcfErrorKind::Xml(e.to_string()),
    })?;
    let mut parser = Parser {
        file: file.to_string(),
        doc: &doc,
        angle_degree: true,
        inertia_from_geom: InertiaFromGeom::Auto,
        classes: HashMap::new(),
        sys: System {
            timestep: 0.002,
            gravity: [0.0, 0.0, -9.81],
            solver_iterations: 100,
            ..System::default()
        },
        link_elements: Vec::new(),
        link_world: Vec::new(),
        link_lines: Vec::new(),
        names: HashMap::from([("body", HashSet::from(["world".to_string()]))]),
        init_qpos_line: None,
    };
    parser.document(doc.root_element())?;
    Ok(parser.sys)
}

struct Parser<'d, 'i> {
    file: String,
    doc: &'d Document<'i>,
    angle_degree: bool,
    inertia_from_geom: InertiaFromGeom,
    classes: HashMap<String, ClassDefaults>,
    sys: System,
    /// Mass elements per link, combined at the end.
    link_elements: Vec<Vec<MassElement>>,
    /// World pose of each link frame (for free joints' `qpos0`).
    link_world: Vec<Pose>,
    /// Line of each link's `<body>` (for errors found when the link is complete).
    link_lines: Vec<u32>,
    /// Names given so far, per kind ("body", "joint", "geom", "actuator", "default class"): MuJoCo
    /// refuses a repeated name within a kind. The world body is named `world`.
    names: HashMap<&'static str, HashSet<String>>,
    init_qpos_line: Option<(u32, String)>,
}

impl<'d, 'i> Parser<'d, 'i> {
    fn line(&self, node: Node) -> u32 {
        self.doc.text_pos_at(node.range().start).row
    }

    fn error(&self, node: Node, kind: MjcfErrorKind) -> MjcfError {
        MjcfError {
            file: self.file.clone(),
            line: self.line(node),
            element: node.tag_name().name().to_string(),
            kind,
        }
    }

    fn error_at(&self, node: Node, line: u32, kind: MjcfErrorKind) -> MjcfError {
        MjcfError { line, ..self.error(node, kind) }
    }

    fn unknown_element(&self, node: Node) -> MjcfError {
        self.error(node, MjcfErrorKind::UnknownElement(node.tag_name().name().to_string()))
    }

    /// Every attribute of `node` must be in `allowed` or `ignored`.
    fn check_attrs(&self, node: Node, allowed: &[&str], ignored: &[&str]) -> Result<()> {
        for attr in node.attributes() {
            let name = attr.name();
            if name == "ref" && node.has_tag_name("joint") {
                return Err(
                    self.error(node, MjcfErrorKind::Unsupported("joint `ref` (Brax rejects it)".into()))
                );
            }
            if !allowed.contains(&name) && !ignored.contains(&name) {
                return Err(self.error(node, MjcfErrorKind::UnknownAttribute(name.to_string())));
            }
        }
        Ok(())
    }

    /// The element's own value, else its default class's, with the line it was written on.
    fn get(&self, node: Node, defaults: Option<&AttrMap>, name: &str) -> Option<(String, u32)> {
        match node.attribute(name) {
            Some(v) => Some((v.to_string(), self.line(node))),
            None => defaults.and_then(|d| d.get(name).cloned()),
        }
    }

    /// Between 1 and `N` numbers; missing trailing ones come from `default`. `exact`: exactly N.
    fn floats<const N: usize>(
        &self,
        node: Node,
        defaults: Option<&AttrMap>,
        name: &str,
        default: [f64; N],
        exact: bool,
    ) -> Result<Option<[f64; N]>> {
        let Some((text, line)) = self.get(node, defaults, name) else { return Ok(None) };
        let bad = || {
            let expected =
                if exact { format!("{N} finite numbers") } else { format!("1 to {N} finite numbers") };
            self.error_at(
                node,
                line,
                MjcfErrorKind::BadNumber { attribute: name.into(), value: text.clone(), expected },
            )
        };
        let values: Vec<f64> = text
            .split_whitespace()
            .map(str::parse::<f64>)
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| bad())?;
        let finite = values.iter().all(|v| v.is_finite());
        if values.is_empty() || values.len() > N || (exact && values.len() != N) || !finite {
            return Err(bad());
        }
        let mut out = default;
        out[..values.len()].copy_from_slice(&values);
        Ok(Some(out))
    }

    fn float(&self, node: Node, defaults: Option<&AttrMap>, name: &str, default: f64) -> Result<f64> {
        Ok(self.floats(node, defaults, name, [default], true)?.map_or(default, |v| v[0]))
    }

    fn vec3(&self, node: Node, defaults: Option<&AttrMap>, name: &str, default: Vec3) -> Result<Vec3> {
        Ok(self.floats(node, defaults, name, default, true)?.unwrap_or(default))
    }

    fn uint(&self, node: Node, defaults: Option<&AttrMap>, name: &str, default: u32) -> Result<u32> {
        self.integer(node, defaults, name, default, "a non-negative integer")
    }

    /// One integer of type `T`; `expected` describes it in the error.
    fn integer<T: std::str::FromStr>(
        &self,
        node: Node,
        defaults: Option<&AttrMap>,
        name: &str,
        default: T,
        expected: &str,
    ) -> Result<T> {
        let Some((text, line)) = self.get(node, defaults, name) else { return Ok(default) };
        text.trim().parse().map_err(|_| {
            self.error_at(
                node,
                line,
                MjcfErrorKind::BadNumber {
                    attribute: name.into(),
                    value: text.clone(),
                    expected: expected.into(),
                },
            )
        })
    }

    /// One of `accepted`, or `None` when absent.
    fn keyword(
        &self,
        node: Node,
        defaults: Option<&AttrMap>,
        name: &str,
        accepted: &[&str],
    ) -> Result<Option<String>> {
        let Some((text, line)) = self.get(node, defaults, name) else { return Ok(None) };
        if accepted.contains(&text.as_str()) {
            Ok(Some(text))
        } else {
            Err(self.error_at(
                node,
                line,
                MjcfErrorKind::BadValue {
                    attribute: name.into(),
                    value: text,
                    accepted: accepted.join(", "),
                },
            ))
        }
    }

    /// MuJoCo's `limited="true|false|auto"` for the range attribute `range_name`: auto means
    /// "limited when a range with `range[0] < range[1]` is given" (MuJoCo 4 leaves `0 0` and
    /// backwards ranges unlimited); `true` needs such a range (MuJoCo rejects the model otherwise).
    /// Returns the range when limited.
    fn limited_range(
        &self,
        node: Node,
        defaults: Option<&AttrMap>,
        name: &str,
        range_name: &str,
    ) -> Result<Option<[f64; 2]>> {
        let range = self.floats(node, defaults, range_name, [0.0; 2], true)?;
        let limited = match self.keyword(node, defaults, name, &["true", "false", "auto"])?.as_deref() {
            Some("true") => true,
            Some("false") => false,
            _ => range.is_some_and(|[lo, hi]| lo < hi),
        };
        if !limited {
            return Ok(None);
        }
        match range {
            Some([lo, hi]) if lo < hi => Ok(Some([lo, hi])),
            _ => Err(self.error(
                node,
                MjcfErrorKind::Invalid(format!(
                    "`{name}` needs `{range_name}` with range[0] < range[1] (MuJoCo rejects the model otherwise)"
                )),
            )),
        }
    }

    fn angle(&self, value: f64) -> f64 {
        if self.angle_degree { value.to_radians() } else { value }
    }

    /// Orientation from `quat`, `euler` or `axisangle` (at most one), identity when none. One
    /// written on the element replaces any from its default class (MuJoCo: a geom with its own
    /// `quat` ignores a class's `euler`).
    fn orientation(&self, node: Node, defaults: Option<&AttrMap>) -> Result<Quat> {
        let own = ["quat", "euler", "axisangle"].iter().any(|a| node.has_attribute(*a));
        let defaults = if own { None } else { defaults };
        let quat = self.floats(node, defaults, "quat", QUAT_IDENTITY, true)?;
        let euler = self.floats(node, defaults, "euler", [0.0; 3], true)?;
        let axisangle = self.floats(node, defaults, "axisangle", [0.0; 4], true)?;
        match (quat, euler, axisangle) {
            (None, None, None) => Ok(QUAT_IDENTITY),
            (Some(q), None, None) if norm([q[0], q[1], q[2]]).hypot(q[3]) > MIN_VALUE => {
                Ok(quat_normalize(q))
            }
            (Some(_), None, None) => {
                Err(self.error(node, MjcfErrorKind::Invalid("zero quaternion (MuJoCo rejects it)".into())))
            }
            (None, Some(e), None) => Ok(quat_from_euler_xyz(e.map(|a| self.angle(a)))),
            (None, None, Some(a)) => Ok(quat_from_axis_angle([a[0], a[1], a[2]], self.angle(a[3]))),
            _ => Err(self
                .error(node, MjcfErrorKind::Unsupported("more than one of quat, euler, axisangle".into()))),
        }
    }

    /// Records `name`, given on `node`, among the names of kind `what` ("body", "joint", ...): MuJoCo
    /// refuses a name repeated within a kind. Empty names (unnamed elements) are not recorded.
    fn unique_name(&mut self, node: Node, what: &'static str, name: &str) -> Result<()> {
        if name.is_empty() || self.names.entry(what).or_default().insert(name.to_string()) {
            return Ok(());
        }
        let msg = format!("repeated {what} name `{name}` (MuJoCo rejects it)");
        Err(self.error(node, MjcfErrorKind::Invalid(msg)))
    }

    fn class_defaults(&self, node: Node, class: &str) -> Result<&ClassDefaults> {
        let class = node.attribute("class").unwrap_or(class);
        self.classes.get(class).ok_or_else(|| {
            self.error(node, MjcfErrorKind::UnknownName { what: "default class".into(), name: class.into() })
        })
    }

    fn document(&mut self, root: Node) -> Result<()> {
        if !root.has_tag_name("mujoco") {
            return Err(self.unknown_element(root));
        }
        self.check_attrs(root, &["model"], &[])?;
        self.sys.model_name = root.attribute("model").unwrap_or_default().to_string();
        self.classes.insert("main".into(), ClassDefaults::default());
        // Settings first: `compiler` decides the angle unit for everything after it.
        for child in elements(root) {
            match child.tag_name().name() {
                "compiler" => self.compiler(child)?,
                "option" => self.option(child)?,
                "custom" => self.custom(child)?,
                "default" => self.default(child, &ClassDefaults::default(), true)?,
                "tendon" if elements(child).next().is_none() => {}
                "statistic" => self.statistic(child)?,
                "worldbody" | "actuator" => {}
                name if IGNORED_ELEMENTS.contains(&name) => {}
                _ => return Err(self.unknown_element(child)),
            }
        }
        for child in elements(root).filter(|c| c.has_tag_name("worldbody")) {
            self.check_attrs(child, &[], &[])?;
            self.body_children(child, None, (([0.0; 3]), QUAT_IDENTITY), "main", None, 0)?;
        }
        for child in elements(root).filter(|c| c.has_tag_name("actuator")) {
            self.actuator(child)?;
        }
        self.finish(root)
    }

    fn compiler(&mut self, node: Node) -> Result<()> {
        self.check_attrs(node, &["angle", "coordinate", "inertiafromgeom"], &[])?;
        if let Some(a) = self.keyword(node, None, "angle", &["degree", "radian"])? {
            self.angle_degree = a == "degree";
        }
        self.keyword(node, None, "coordinate", &["local"])?;
        if let Some(v) = self.keyword(node, None, "inertiafromgeom", &["true", "false", "auto"])? {
            self.inertia_from_geom = match v.as_str() {
                "true" => InertiaFromGeom::True,
                "false" => InertiaFromGeom::False,
                _ => InertiaFromGeom::Auto,
            };
        }
        if let Some(child) = elements(node).next() {
            return Err(self.unknown_element(child));
        }
        Ok(())
    }

    fn option(&mut self, node: Node) -> Result<()> {
        self.check_attrs(node, &["timestep", "gravity", "iterations", "integrator"], &[])?;
        self.sys.timestep = self.float(node, None, "timestep", self.sys.timestep)?;
        self.sys.gravity = self.vec3(node, None, "gravity", self.sys.gravity)?;
        self.sys.solver_iterations =
            self.uint(node, None, "iterations", self.sys.solver_iterations as u32)? as usize;
        self.keyword(node, None, "integrator", &["Euler"])?;
        if let Some(child) = elements(node).next() {
            return Err(self.unknown_element(child));
        }
        Ok(())
    }

    /// `<statistic>`: metadata for rendering, read only to refuse what MuJoCo refuses.
    fn statistic(&self, node: Node) -> Result<()> {
        self.check_attrs(node, STATISTIC_ATTRS, &[])?;
        for name in ["meaninertia", "meanmass", "meansize"] {
            self.floats(node, None, name, [0.0], true)?;
        }
        self.floats(node, None, "center", [0.0; 3], true)?;
        if self.floats(node, None, "extent", [0.0], true)?.is_some_and(|[e]| e <= 0.0) {
            let msg = "extent must be strictly positive (MuJoCo rejects it)".into();
            return Err(self.error(node, MjcfErrorKind::Invalid(msg)));
        }
        if let Some(child) = elements(node).next() {
            return Err(self.unknown_element(child));
        }
        Ok(())
    }

    fn custom(&mut self, node: Node) -> Result<()> {
        self.check_attrs(node, &[], &[])?;
        for child in elements(node) {
            if !child.has_tag_name("numeric") {
                return Err(self.unknown_element(child));
            }
            self.check_attrs(child, &["name", "data"], &[])?;
            let missing = |a: &str| self.error(child, MjcfErrorKind::MissingAttribute(a.into()));
            let name = child.attribute("name").ok_or_else(|| missing("name"))?;
            let data = child.attribute("data").ok_or_else(|| missing("data"))?;
            let values = data
                .split_whitespace()
                .map(str::parse::<f64>)
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|_| {
                    self.error(
                        child,
                        MjcfErrorKind::BadNumber {
                            attribute: "data".into(),
                            value: data.into(),
                            expected: "numbers".into(),
                        },
                    )
                })?;
            if name == "init_qpos" {
                self.init_qpos_line = Some((self.line(child), data.to_string()));
            }
            self.sys.custom.insert(name.to_string(), values);
        }
        Ok(())
    }

    /// A `<default>` (the top one is class `main`): its joint/geom/motor settings over `inherited`,
    /// then its nested classes, which inherit the result.
    fn default(&mut self, node: Node, inherited: &ClassDefaults, top: bool) -> Result<()> {
        self.check_attrs(node, &["class"], &[])?;
        let class = match node.attribute("class") {
            // MuJoCo: the top class is `main`, named so, unnamed or "" (its settings applied to
            // elements without a class); another name is refused.
            None | Some("" | "main") if top => "main".to_string(),
            Some(c) if top => {
                let msg = format!("top-level default class `{c}` cannot be renamed (MuJoCo rejects it)");
                return Err(self.error(node, MjcfErrorKind::Invalid(msg)));
            }
            Some(c) => c.to_string(),
            None => return Err(self.error(node, MjcfErrorKind::MissingAttribute("class".into()))),
        };
        if class.is_empty() && !top {
            return Err(
                self.error(node, MjcfErrorKind::Invalid("empty class name (MuJoCo rejects it)".into()))
            );
        }
        self.unique_name(node, "default class", &class)?;
        let mut own = inherited.clone();
        for child in elements(node) {
            let (map, allowed, ignored) = match child.tag_name().name() {
                "joint" => (&mut own.joint, JOINT_ATTRS, &[][..]),
                "geom" => (&mut own.geom, GEOM_ATTRS, GEOM_VISUAL_ATTRS),
                "motor" => (&mut own.motor, MOTOR_ATTRS, &[][..]),
                "default" => continue,
                "tendon" if elements(child).next().is_none() => continue,
                name if IGNORED_IN_DEFAULT.contains(&name) => continue,
                _ => return Err(self.unknown_element(child)),
            };
            self.check_attrs(child, allowed, ignored)?;
            let line = self.line(child);
            for attr in child.attributes().filter(|a| !ignored.contains(&a.name())) {
                map.insert(attr.name().to_string(), (attr.value().to_string(), line));
            }
        }
        for child in elements(node).filter(|c| c.has_tag_name("default")) {
            self.default(child, &own, false)?;
        }
        self.classes.insert(class, own);
        Ok(())
    }

    /// The children of a body (or the world body, `link == None`). `frame`: this body's frame in
    /// the frame of the link it is merged into.
    fn body_children(
        &mut self,
        node: Node,
        link: Option<usize>,
        frame: Pose,
        childclass: &str,
        inertial: Option<Node>,
        depth: usize,
    ) -> Result<()> {
        let mut geom_mass = Vec::new();
        for child in elements(node) {
            match child.tag_name().name() {
                "geom" => {
                    if let Some(e) = self.geom(child, link, frame, childclass)? {
                        geom_mass.push(e);
                    }
                }
                "body" => self.body(child, link, frame, childclass, depth + 1)?,
                // Joints and inertial are read by `body` (the world body may have neither).
                "joint" | "freejoint" | "inertial" if !node.has_tag_name("worldbody") => {}
                name if IGNORED_IN_BODY.contains(&name) => {}
                _ => return Err(self.unknown_element(child)),
            }
        }
        let Some(link) = link else { return Ok(()) };
        let use_geoms = match self.inertia_from_geom {
            InertiaFromGeom::True => true,
            InertiaFromGeom::False => false,
            InertiaFromGeom::Auto => inertial.is_none(),
        };
        if use_geoms {
            self.link_elements[link].extend(geom_mass);
        } else if let Some(inertial) = inertial {
            let e = self.inertial(inertial, frame)?;
            self.link_elements[link].push(e);
        }
        Ok(())
    }

    fn body(
        &mut self,
        node: Node,
        parent: Option<usize>,
        parent_frame: Pose,
        childclass: &str,
        depth: usize,
    ) -> Result<()> {
        if depth > MAX_BODY_DEPTH {
            let msg = format!("bodies nested more than {MAX_BODY_DEPTH} deep");
            return Err(self.error(node, MjcfErrorKind::Unsupported(msg)));
        }
        self.check_attrs(node, &["name", "pos", "quat", "euler", "axisangle", "childclass"], &[])?;
        self.unique_name(node, "body", node.attribute("name").unwrap_or_default())?;
        let childclass = node.attribute("childclass").unwrap_or(childclass).to_string();
        self.class_defaults(node, &childclass)?; // an unknown childclass is an error here
        let local = (self.vec3(node, None, "pos", [0.0; 3])?, self.orientation(node, None)?);
        let frame = compose(parent_frame, local);
        let joints: Vec<Node> =
            elements(node).filter(|c| c.has_tag_name("joint") || c.has_tag_name("freejoint")).collect();
        let inertial = elements(node).find(|c| c.has_tag_name("inertial"));
        if joints.is_empty() {
            // Jointless: welded to the parent, so its geoms, mass and children join the parent link.
            return self.body_children(node, parent, frame, &childclass, inertial, depth);
        }
        let link = self.sys.links.names.len();
        let links = &mut self.sys.links;
        links.names.push(node.attribute("name").unwrap_or_default().to_string());
        links.parents.push(parent);
        links.pos.push(frame.0);
        links.quat.push(frame.1);
        self.link_elements.push(Vec::new());
        let parent_world = parent.map_or(([0.0; 3], QUAT_IDENTITY), |p| self.link_world[p]);
        self.link_world.push(compose(parent_world, frame));
        self.link_lines.push(self.line(node));
        for joint in joints {
            self.joint(joint, link, &childclass)?;
        }
        self.body_children(node, Some(link), ([0.0; 3], QUAT_IDENTITY), &childclass, inertial, depth)
    }

    fn inertial(&self, node: Node, frame: Pose) -> Result<MassElement> {
        self.check_attrs(
            node,
            &["pos", "quat", "euler", "axisangle", "mass", "diaginertia", "fullinertia"],
            &[],
        )?;
        let pos = self
            .floats(node, None, "pos", [0.0; 3], true)?
            .ok_or_else(|| self.error(node, MjcfErrorKind::MissingAttribute("pos".into())))?;
        let quat = self.orientation(node, None)?;
        let mass = self
            .floats(node, None, "mass", [0.0], true)?
            .ok_or_else(|| self.error(node, MjcfErrorKind::MissingAttribute("mass".into())))?[0];
        if mass < 0.0 {
            return Err(self.error(node, MjcfErrorKind::Invalid("negative mass (MuJoCo rejects it)".into())));
        }
        let local = match (
            self.floats(node, None, "diaginertia", [0.0; 3], true)?,
            self.floats(node, None, "fullinertia", [0.0; 6], true)?,
        ) {
            (Some(d), None) => rotate_inertia(quat, super::math::diag(d)),
            (None, Some([xx, yy, zz, xy, xz, yz])) => {
                rotate_inertia(quat, [[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
            }
            (None, None) => {
                return Err(self.error(node, MjcfErrorKind::MissingAttribute("diaginertia".into())));
            }
            (Some(_), Some(_)) => {
                return Err(
                    self.error(node, MjcfErrorKind::Unsupported("both diaginertia and fullinertia".into()))
                );
            }
        };
        Ok(MassElement {
            mass,
            com: add(frame.0, rotate(frame.1, pos)),
            inertia: rotate_inertia(frame.1, local),
        })
    }

    fn joint(&mut self, node: Node, link: usize, childclass: &str) -> Result<()> {
        let free_element = node.has_tag_name("freejoint");
        let class = if free_element {
            ClassDefaults::default()
        } else {
            self.class_defaults(node, childclass)?.clone()
        };
        let d = Some(&class.joint);
        if free_element {
            self.check_attrs(node, &["name"], &[])?;
        } else {
            self.check_attrs(node, JOINT_ATTRS, &[])?;
        }
        let kind = if free_element {
            JointType::Free
        } else {
            match self.get(node, d, "type").map(|(t, _)| t).as_deref() {
                None | Some("hinge") => JointType::Hinge,
                Some("slide") => JointType::Slide,
                Some("free") => JointType::Free,
                Some("ball") => {
                    return Err(self.error(
                        node,
                        MjcfErrorKind::Unsupported("ball joint (Brax rejects them: use three hinges)".into()),
                    ));
                }
                Some(_) => {
                    self.keyword(node, d, "type", &["hinge", "slide", "free"])?;
                    unreachable!("keyword rejects other values");
                }
            }
        };
        // MuJoCo refuses a free joint on any body that is not a child of the world body, also one
        // inside static (jointless) bodies (kiln's kinematics takes its q as the body's world pose).
        let body_parent = node.parent_element().and_then(|body| body.parent_element());
        if kind == JointType::Free && !body_parent.is_some_and(|p| p.has_tag_name("worldbody")) {
            let msg = "a free joint on a body that is not a child of the world body \
                       (MuJoCo: free joint can only be used on top level)";
            return Err(self.error(node, MjcfErrorKind::Invalid(msg.into())));
        }
        let name = node.attribute("name").unwrap_or_default().to_string();
        self.unique_name(node, "joint", &name)?;
        let axis = self.vec3(node, d, "axis", [0.0, 0.0, 1.0])?;
        if norm(axis) < 1e-12 && kind != JointType::Free {
            return Err(self.error(node, MjcfErrorKind::Unsupported("zero joint axis".into())));
        }
        // A free joint's range is ignored (MuJoCo), once it reads as numbers.
        let range = if kind == JointType::Free {
            self.floats(node, d, "range", [0.0; 2], true)?;
            None
        } else {
            self.limited_range(node, d, "limited", "range")?
        };
        let limited = range.is_some();
        let range = match range {
            Some(r) if kind == JointType::Hinge => r.map(|a| self.angle(a)),
            Some(r) => r,
            None => [0.0; 2],
        };
        let stiffness = self.float(node, d, "stiffness", 0.0)?;
        let damping = self.float(node, d, "damping", 0.0)?;
        let armature = self.float(node, d, "armature", 0.0)?;
        let margin = self.float(node, d, "margin", 0.0)?;
        if kind == JointType::Free && stiffness != 0.0 {
            return Err(self.error(node, MjcfErrorKind::Unsupported("stiffness on a free joint".into())));
        }
        let pos = self.vec3(node, d, "pos", [0.0; 3])?;
        let joints = &mut self.sys.joints;
        joints.names.push(name);
        joints.types.push(kind);
        joints.link.push(link);
        joints.pos.push(pos);
        joints.axis.push(normalize(axis));
        joints.limited.push(limited);
        joints.range.push(range);
        joints.stiffness.push(stiffness);
        joints.damping.push(damping);
        joints.armature.push(armature);
        joints.margin.push(margin);
        joints.q_start.push(self.sys.nq);
        joints.dof_start.push(self.sys.nv);
        self.sys.nq += kind.nq();
        self.sys.nv += kind.nv();
        Ok(())
    }

    /// Adds a geom; returns its mass element in the link frame (none for planes and for geoms outside
    /// [`INERTIA_GROUPS`]).
    fn geom(
        &mut self,
        node: Node,
        link: Option<usize>,
        frame: Pose,
        childclass: &str,
    ) -> Result<Option<MassElement>> {
        let class = self.class_defaults(node, childclass)?.clone();
        let d = Some(&class.geom);
        self.check_attrs(node, GEOM_ATTRS, GEOM_VISUAL_ATTRS)?;
        let kind = match self.keyword(node, d, "type", &["plane", "sphere", "capsule", "box"])?.as_deref() {
            Some("plane") => GeomType::Plane,
            None | Some("sphere") => GeomType::Sphere,
            Some("capsule") => GeomType::Capsule,
            Some("box") => GeomType::Box,
            Some(other) => unreachable!("keyword accepted {other}"),
        };
        let invalid = |msg: String| self.error(node, MjcfErrorKind::Invalid(msg));
        if kind == GeomType::Plane && link.is_some() {
            return Err(invalid(
                "a plane on a moving body (MuJoCo: plane only allowed in static bodies)".into(),
            ));
        }
        let mut size = self.floats(node, d, "size", [0.0; 3], false)?;
        let fromto = self.floats(node, d, "fromto", [0.0; 6], true)?;
        let (pos, quat) = match fromto {
            Some(ft) => {
                if kind != GeomType::Capsule {
                    return Err(
                        self.error(node, MjcfErrorKind::Unsupported("fromto on a non-capsule geom".into()))
                    );
                }
                let (from, to) = ([ft[0], ft[1], ft[2]], [ft[3], ft[4], ft[5]]);
                let axis = sub(to, from);
                if let Some(s) = size.as_mut() {
                    s[1] = 0.5 * norm(axis);
                }
                (scale(add(from, to), 0.5), quat_z_to(axis))
            }
            None => (self.vec3(node, d, "pos", [0.0; 3])?, self.orientation(node, d)?),
        };
        let size = match (kind, size) {
            (GeomType::Plane, s) => s.unwrap_or([0.0; 3]),
            (_, Some(s)) => s,
            (_, None) => return Err(self.error(node, MjcfErrorKind::MissingAttribute("size".into()))),
        };
        // The sizes the type uses (radius; radius and half-length; three half-sizes) must be positive.
        let used = match kind {
            GeomType::Plane => 0,
            GeomType::Sphere => 1,
            GeomType::Capsule => 2,
            GeomType::Box => 3,
        };
        if let Some(i) = (0..used).find(|&i| size[i] <= 0.0) {
            return Err(invalid(format!("size {i} must be positive in a {kind:?} geom (MuJoCo rejects it)")));
        }
        let (pos, quat) = compose(frame, (pos, quat));
        let density = self.float(node, d, "density", 1000.0)?;
        let mass = match kind {
            GeomType::Plane => 0.0,
            GeomType::Sphere | GeomType::Capsule | GeomType::Box => {
                match self.floats(node, d, "mass", [0.0], true)? {
                    Some([m]) => m,
                    None => density * volume(kind, size),
                }
            }
        };
        if mass < 0.0 || density < 0.0 {
            return Err(invalid("mass or density is negative in a geom (MuJoCo rejects it)".into()));
        }
        let friction = self.floats(node, d, "friction", [1.0, 0.005, 0.0001], false)?;
        let solref = self.floats(node, d, "solref", [0.02, 1.0], false)?;
        let solimp = self.floats(node, d, "solimp", [0.9, 0.95, 0.001, 0.5, 2.0], false)?;
        let contype = self.uint(node, d, "contype", 1)?;
        let conaffinity = self.uint(node, d, "conaffinity", 1)?;
        let condim = self.uint(node, d, "condim", 3)?;
        if ![1, 3, 4, 6].contains(&condim) {
            return Err(invalid(format!("condim {condim}: MuJoCo accepts 1, 3, 4 or 6")));
        }
        let margin = self.float(node, d, "margin", 0.0)?;
        let group = self.integer(node, d, "group", 0, "an integer")?;
        let name = node.attribute("name").unwrap_or_default();
        self.unique_name(node, "geom", name)?;
        let geoms = &mut self.sys.geoms;
        geoms.names.push(name.to_string());
        geoms.types.push(kind);
        geoms.link.push(link);
        geoms.pos.push(pos);
        geoms.quat.push(quat);
        geoms.size.push(size);
        geoms.friction.push(friction.unwrap_or([1.0, 0.005, 0.0001]));
        geoms.solref.push(solref.unwrap_or([0.02, 1.0]));
        geoms.solimp.push(solimp.unwrap_or([0.9, 0.95, 0.001, 0.5, 2.0]));
        geoms.mass.push(mass);
        let geoms = &mut self.sys.geoms;
        geoms.contype.push(contype);
        geoms.conaffinity.push(conaffinity);
        geoms.condim.push(condim);
        geoms.margin.push(margin);
        let in_inertia = kind != GeomType::Plane && INERTIA_GROUPS.contains(&group);
        Ok(in_inertia.then(|| MassElement {
            mass,
            com: pos,
            inertia: rotate_inertia(quat, super::math::diag(principal_inertia(kind, size, mass))),
        }))
    }

    fn actuator(&mut self, node: Node) -> Result<()> {
        self.check_attrs(node, &[], &[])?;
        for child in elements(node) {
            if !child.has_tag_name("motor") {
                return Err(self.unknown_element(child));
            }
            let class = self.class_defaults(child, "main")?.clone();
            let d = Some(&class.motor);
            self.check_attrs(child, MOTOR_ATTRS, &[])?;
            let (joint_name, line) = self
                .get(child, d, "joint")
                .ok_or_else(|| self.error(child, MjcfErrorKind::MissingAttribute("joint".into())))?;
            // Unnamed joints cannot be referred to (`joint=""` names none of them).
            let joint = self.sys.joints.names.iter().position(|n| !n.is_empty() && *n == joint_name);
            let joint = joint.ok_or_else(|| {
                self.error_at(
                    child,
                    line,
                    MjcfErrorKind::UnknownName { what: "joint".into(), name: joint_name.clone() },
                )
            })?;
            let gear = self.floats(child, d, "gear", [1.0, 0.0, 0.0, 0.0, 0.0, 0.0], false)?;
            let ctrl_range = self.limited_range(child, d, "ctrllimited", "ctrlrange")?;
            let force_range = self.limited_range(child, d, "forcelimited", "forcerange")?;
            let name = child.attribute("name").unwrap_or_default();
            self.unique_name(child, "actuator", name)?;
            let acts = &mut self.sys.actuators;
            acts.names.push(name.to_string());
            acts.joint.push(joint);
            acts.gear.push(gear.map_or(1.0, |g| g[0]));
            acts.ctrl_limited.push(ctrl_range.is_some());
            acts.ctrl_range.push(ctrl_range.unwrap_or([0.0; 2]));
            acts.force_limited.push(force_range.is_some());
            acts.force_range.push(force_range.unwrap_or([0.0; 2]));
        }
        Ok(())
    }

    /// Link masses and inertias, and the initial `q`.
    fn finish(&mut self, root: Node) -> Result<()> {
        for (link, elements) in self.link_elements.iter().enumerate() {
            let (mass, com, inertia, diag, iquat) = combine(elements);
            if !(mass > MIN_VALUE && diag.iter().all(|&d| d > MIN_VALUE)) {
                let msg = format!(
                    "a moving body's mass ({mass}) and principal inertias ({diag:?}) must be larger than \
                     {MIN_VALUE} (MuJoCo's mjMINVAL; give it a geom or an <inertial>)"
                );
                return Err(MjcfError {
                    file: self.file.clone(),
                    line: self.link_lines[link],
                    element: "body".into(),
                    kind: MjcfErrorKind::Invalid(msg),
                });
            }
            let links = &mut self.sys.links;
            links.mass.push(mass);
            links.com.push(com);
            links.inertia.push(inertia);
            links.inertia_diag.push(diag);
            links.inertia_quat.push(iquat);
        }
        if let Some(init) = self.sys.custom.get("init_qpos") {
            if init.len() != self.sys.nq {
                let (line, value) = self.init_qpos_line.clone().unwrap_or_default();
                return Err(MjcfError {
                    file: self.file.clone(),
                    line,
                    element: "numeric".into(),
                    kind: MjcfErrorKind::BadNumber {
                        attribute: "data".into(),
                        value,
                        expected: format!("{} numbers (nq) for init_qpos", self.sys.nq),
                    },
                });
            }
            self.sys.init_q = init.clone();
        } else {
            let mut q = Vec::with_capacity(self.sys.nq);
            for (j, kind) in self.sys.joints.types.iter().enumerate() {
                match kind {
                    JointType::Free => {
                        let (p, r) = self.link_world[self.sys.joints.link[j]];
                        q.extend_from_slice(&p);
                        q.extend_from_slice(&r);
                    }
                    JointType::Hinge | JointType::Slide => q.push(0.0),
                }
            }
            self.sys.init_q = q;
        }
        let _ = root;
        Ok(())
    }
}
