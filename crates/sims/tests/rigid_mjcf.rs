//! MJCF loading: Brax's models give hand-checked `System` values; bad files give errors naming the
//! file, line and element.

use std::f64::consts::PI;

use kiln_sims::rigid::{GeomType, JointType, MjcfErrorKind, System};

fn load(name: &str) -> System {
    let path = format!("{}/data/mjcf/{name}", env!("CARGO_MANIFEST_DIR"));
    System::from_mjcf_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn close(a: f64, b: f64, tol: f64) {
    assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{a} vs {b}");
}

#[test]
fn inverted_pendulum_loads_with_hand_checked_values() {
    let sys = load("inverted_pendulum.xml");
    assert_eq!(sys.link_types(), "11");
    assert_eq!(sys.links.names, ["cart", "pole"]);
    assert_eq!(sys.links.parents, [None, Some(0)]);
    assert_eq!(sys.joints.types, [JointType::Slide, JointType::Hinge]);
    assert_eq!((sys.nq, sys.nv), (2, 2));
    assert_eq!(sys.timestep, 0.02);
    assert_eq!(sys.gravity, [0.0, 0.0, -9.81]);
    // Default class: damping 1, armature 0, limited; hinge range -90..90 degrees (MuJoCo default unit).
    assert_eq!(sys.joints.damping, [1.0, 1.0]);
    assert_eq!(sys.joints.armature, [0.0, 0.0]);
    assert_eq!(sys.joints.limited, [true, true]);
    assert_eq!(sys.joints.range[0], [-1.0, 1.0]);
    close(sys.joints.range[1][0], -PI / 2.0, 1e-15);
    close(sys.joints.range[1][1], PI / 2.0, 1e-15);
    assert_eq!(sys.joints.axis[0], [1.0, 0.0, 0.0]);
    // Cart: capsule r = 0.1, half-length 0.1 (H = 0.2), density 1000.
    //   cylinder 1000·π·0.1²·0.2 = 2π = 6.283185, caps 1000·4/3·π·0.1³ = 4.188790, total 10π/3.
    close(sys.links.mass[0], 10.0 * PI / 3.0, 1e-12);
    // Axis along x (quat 0.707 0 0.707 0 = 90° about y):
    //   along  = 6.283185·0.1²/2 + 4.188790·0.4·0.1² = 0.0314159 + 0.0167552 = 0.0481711
    //   across = 6.283185·(0.01/4 + 0.04/12) + 4.188790·(0.004 + 0.04/4 + 3·0.2·0.1/8)
    //          = 6.283185·0.0058333 + 4.188790·0.0215 = 0.0366519 + 0.0900590 = 0.1267109
    let inertia = sys.links.inertia[0];
    close(inertia[0][0], 0.0481711, 1e-6);
    close(inertia[1][1], 0.1267109, 1e-6);
    close(inertia[2][2], 0.1267109, 1e-6);
    close(inertia[0][2], 0.0, 1e-9);
    // Pole: fromto 0 0 0 → 0.001 0 0.6, r 0.049: L = √(0.001² + 0.6²) = 0.60000083
    //   cylinder 1000·π·0.049²·L = 4.525784, caps 1000·4/3·π·0.049³ = 0.492807 → 5.018592 (Brax: 5.02)
    let length = (0.001f64.powi(2) + 0.36).sqrt();
    close(
        sys.links.mass[1],
        1000.0 * PI * 0.049f64.powi(2) * length + 4000.0 / 3.0 * PI * 0.049f64.powi(3),
        1e-12,
    );
    close(sys.links.mass[1], 5.018592, 1e-6);
    close(sys.links.com[1][2], 0.3, 1e-12);
    // Geoms: world rail + cart + pole; contype 0 and friction from the default class.
    assert_eq!(sys.geoms.link, [None, Some(0), Some(1)]);
    assert!(sys.geoms.types.iter().all(|&t| t == GeomType::Capsule));
    assert_eq!(sys.geoms.contype, [0, 0, 0]);
    assert_eq!(sys.geoms.friction[2], [1.0, 0.1, 0.1]);
    close(sys.geoms.size[2][1], length / 2.0, 1e-15);
    // Actuator.
    assert_eq!(sys.actuators.joint, [0]);
    assert_eq!(sys.actuators.gear, [100.0]);
    assert_eq!(sys.actuators.ctrl_range, [[-3.0, 3.0]]);
    assert_eq!(sys.actuators.ctrl_limited, [true]);
    // Brax custom values and qpos0.
    assert_eq!(sys.custom_value("constraint_stiffness"), Some(&[10000.0][..]));
    assert_eq!(sys.custom_value("spring_mass_scale"), Some(&[0.0][..]));
    assert_eq!(sys.init_q, [0.0, 0.0]);
}

#[test]
fn inverted_double_pendulum_loads_with_hand_checked_values() {
    let sys = load("inverted_double_pendulum.xml");
    assert_eq!(sys.link_types(), "111");
    assert_eq!(sys.links.parents, [None, Some(0), Some(1)]);
    assert_eq!(sys.joints.types, [JointType::Slide, JointType::Hinge, JointType::Hinge]);
    assert_eq!(sys.timestep, 0.01);
    assert_eq!(sys.gravity, [1e-5, 0.0, -9.81]);
    // Hinges give no range and no `limited`: MuJoCo's "auto" leaves them unlimited.
    assert_eq!(sys.joints.limited, [true, false, false]);
    assert_eq!(sys.joints.damping, [0.05; 3]);
    assert_eq!(sys.joints.margin[0], 0.01);
    // Poles: r 0.045, H 0.6: cylinder 1000·π·0.045²·0.6 = 3.817035, caps 1000·4/3·π·0.045³ = 0.381704.
    close(sys.links.mass[1], 4.198739, 1e-6);
    close(sys.links.mass[2], 4.198739, 1e-6);
    // About the COM (0, 0, 0.3), across the z axis:
    //   3.817035·(0.045²/4 + 0.36/12) + 0.381704·(0.4·0.045² + 0.36/4 + 3·0.6·0.045/8)
    //   = 3.817035·0.03050625 + 0.381704·0.10094250 = 0.1164434 + 0.0385302 = 0.1549736 (≈ 0.1549707 below
    //   to rounding); along z: 3.817035·0.045²/2 + 0.381704·0.4·0.045² = 0.0038648 + 0.0003092 = 0.0041739
    close(sys.links.com[2][2], 0.3, 1e-12);
    close(sys.links.inertia[2][0][0], 0.1549707, 1e-5);
    close(sys.links.inertia[2][2][2], 0.0041739, 1e-5);
    // pole2 sits 0.6 above pole.
    assert_eq!(sys.links.pos[2], [0.0, 0.0, 0.6]);
    assert_eq!(sys.actuators.gear, [500.0]);
    assert_eq!(sys.actuators.ctrl_range, [[-1.0, 1.0]]);
    assert_eq!(sys.custom_value("constraint_vel_damping"), Some(&[500.0, 30.0, 30.0][..]));
}

#[test]
fn reacher_merges_the_fingertip_and_reads_radians() {
    let sys = load("reacher.xml");
    // fingertip has no joint: merged into body1. target has two slides: link type 2.
    assert_eq!(sys.links.names, ["body0", "body1", "target"]);
    assert_eq!(sys.link_types(), "112");
    assert_eq!((sys.nq, sys.nv), (4, 4));
    // compiler angle="radian": joint1's range stays -3..3.
    assert_eq!(sys.joints.limited, [false, true, true, true]);
    assert_eq!(sys.joints.range[1], [-3.0, 3.0]);
    // Default armature 1 on the arm; the target's joints override it with 0.
    assert_eq!(sys.joints.armature, [1.0, 1.0, 0.0, 0.0]);
    // body1: capsule r 0.01, length 0.1 (cylinder 1000·π·1e-4·0.1 = 0.0314159, caps 0.0041888,
    // COM x 0.05) + fingertip sphere r 0.01 (0.0041888, at x 0.11):
    //   mass 0.0397935; COM x = (0.0356047·0.05 + 0.0041888·0.11) / 0.0397935 = 0.0563158
    close(sys.links.mass[1], 0.0397935, 1e-6);
    close(sys.links.com[1][0], 0.0563158, 1e-6);
    let fingertip = sys.geoms.names.iter().position(|n| n == "fingertip").unwrap();
    assert_eq!(sys.geoms.link[fingertip], Some(1));
    assert_eq!(sys.geoms.pos[fingertip], [0.11, 0.0, 0.0]);
    assert_eq!(sys.actuators.gear, [200.0, 200.0]);
    assert_eq!(sys.init_q, [0.0, 0.0, 0.1, -0.1]);
    assert_eq!(sys.custom_value("constraint_stiffness"), Some(&[1000.0, 1000.0, 10.0][..]));
}

#[test]
fn ant_loads_with_hand_checked_values() {
    let sys = load("ant.xml");
    assert_eq!(sys.link_types(), "f11111111");
    assert_eq!((sys.nq, sys.nv), (15, 14));
    assert_eq!(sys.timestep, 0.01);
    assert_eq!(sys.solver_iterations, 4);
    assert_eq!(
        sys.links.parents,
        [None, Some(0), Some(1), Some(0), Some(3), Some(0), Some(5), Some(0), Some(7)]
    );
    // The jointless *_leg bodies merged into the torso: aux_1 hangs 0.2 0.2 0 off the torso.
    assert_eq!(sys.links.pos[1], [0.2, 0.2, 0.0]);
    assert_eq!(sys.links.pos[0], [0.0, 0.0, 0.75]);
    // Torso: sphere r 0.25 at density 5 (5·4/3·π·0.25³ = 0.3272492) + 4 aux capsules r 0.08,
    // length |(0.2, 0.2, 0)| = 0.2828427 (cylinder 5·π·0.0064·0.2828427 = 0.0284345, caps
    // 5·4/3·π·0.08³ = 0.0107233, each 0.0391578): 0.3272492 + 4·0.0391578 = 0.4838802; COM 0 by symmetry.
    close(sys.links.mass[0], 0.4838802, 1e-6);
    for c in sys.links.com[0] {
        close(c, 0.0, 1e-12);
    }
    // Ankle links: capsule of length 0.4·√2 (0.0675922 kg); the foot sphere has mass="0".
    close(sys.links.mass[2], 0.0675922, 1e-6);
    // Degrees: hips ±30°, ankle_1 30..70°; axis -1 1 0 normalized.
    close(sys.joints.range[1][1], PI / 6.0, 1e-15);
    close(sys.joints.range[2][0], PI / 6.0, 1e-15);
    close(sys.joints.range[2][1], 7.0 * PI / 18.0, 1e-15);
    let s = 0.5f64.sqrt();
    close(sys.joints.axis[2][0], -s, 1e-15);
    close(sys.joints.axis[2][1], s, 1e-15);
    // Free root: not limited, armature/damping 0 overriding the default class's 1.
    assert_eq!(sys.joints.types[0], JointType::Free);
    assert_eq!(sys.joints.limited[0], false);
    assert_eq!((sys.joints.armature[0], sys.joints.damping[0]), (0.0, 0.0));
    assert_eq!((sys.joints.armature[1], sys.joints.damping[1]), (1.0, 1.0));
    // 18 geoms: floor, torso, 4 aux, 4 legs, 4 ankles, 4 feet; only the feet collide (contype 1).
    assert_eq!(sys.geoms.names.len(), 18);
    let colliding: Vec<&str> =
        (0..18).filter(|&g| sys.geoms.contype[g] == 1).map(|g| sys.geoms.names[g].as_str()).collect();
    assert_eq!(colliding, ["left_foot_geom", "right_foot_geom", "third_foot_geom", "fourth_foot_geom"]);
    assert_eq!(sys.geoms.types[0], GeomType::Plane);
    assert_eq!(sys.geoms.friction[1], [1.0, 0.5, 0.5]);
    // aux_1_geom is in the torso link, centred halfway along 0 0 0 → 0.2 0.2 0.
    let aux = sys.geoms.names.iter().position(|n| n == "aux_1_geom").unwrap();
    assert_eq!(sys.geoms.link[aux], Some(0));
    assert_eq!(sys.geoms.pos[aux], [0.1, 0.1, 0.0]);
    assert_eq!(sys.actuators.gear, [150.0; 8]);
    assert_eq!(sys.actuators.joint[0], sys.joints.names.iter().position(|n| n == "hip_4").unwrap());
    assert_eq!(sys.init_q[2], 0.55);
    assert_eq!(sys.init_q.len(), 15);
}

#[test]
fn nested_default_classes_and_childclass_apply() {
    let xml = r#"<mujoco>
  <default>
    <joint damping="2"/>
    <default class="stiff">
      <joint stiffness="7"/>
      <default class="stiffer"><joint stiffness="9"/></default>
    </default>
  </default>
  <worldbody>
    <body childclass="stiff">
      <joint name="a" type="hinge"/>
      <geom type="box" size="0.1 0.2 0.3" mass="6"/>
      <body><joint name="b" class="stiffer" type="slide"/><geom type="sphere" size="0.1"/></body>
    </body>
  </worldbody>
</mujoco>"#;
    let sys = System::from_mjcf_str("inline.xml", xml).unwrap();
    assert_eq!(sys.joints.stiffness, [7.0, 9.0]);
    assert_eq!(sys.joints.damping, [2.0, 2.0]);
    // Box, mass 6, half-sizes 0.1 0.2 0.3: Ixx = 6/3·(0.04 + 0.09) = 0.26, Iyy = 2·(0.01 + 0.09) = 0.2,
    // Izz = 2·(0.01 + 0.04) = 0.1.
    close(sys.links.inertia[0][0][0], 0.26, 1e-12);
    close(sys.links.inertia[0][1][1], 0.2, 1e-12);
    close(sys.links.inertia[0][2][2], 0.1, 1e-12);
    assert_eq!(sys.links.inertia_diag[0].map(|v| (v * 1e12).round() / 1e12).iter().sum::<f64>(), 0.56);
}

fn error_of(xml: &str) -> kiln_sims::rigid::MjcfError {
    System::from_mjcf_str("bad.xml", xml).expect_err("should fail")
}

#[test]
fn unknown_element_names_file_line_and_element() {
    let e = error_of("<mujoco>\n<worldbody>\n<body>\n<joint/>\n<wheel/>\n</body></worldbody></mujoco>");
    assert!(matches!(e.kind, MjcfErrorKind::UnknownElement(ref n) if n == "wheel"));
    assert_eq!((e.line, e.element.as_str()), (5, "wheel"));
    assert!(e.to_string().starts_with("bad.xml:5: <wheel>:"), "{e}");
}

#[test]
fn unknown_attribute_is_an_error() {
    let e = error_of(
        "<mujoco><worldbody>\n<geom type=\"sphere\" size=\"1\" shininess=\"3\"/></worldbody></mujoco>",
    );
    assert!(matches!(e.kind, MjcfErrorKind::UnknownAttribute(ref a) if a == "shininess"));
    assert_eq!((e.line, e.element.as_str()), (2, "geom"));
}

#[test]
fn missing_attribute_names_it() {
    let e = error_of(
        "<mujoco><worldbody><body><joint name=\"j\"/><geom size=\"1\"/></body></worldbody>\n<actuator>\n  <motor gear=\"3\"/>\n</actuator></mujoco>",
    );
    assert!(matches!(e.kind, MjcfErrorKind::MissingAttribute(ref a) if a == "joint"));
    assert_eq!((e.line, e.element.as_str()), (3, "motor"));
    assert!(e.to_string().contains("bad.xml:3: <motor>: missing attribute `joint`"), "{e}");
}

#[test]
fn malformed_number_names_attribute_and_value() {
    let e = error_of("<mujoco><worldbody>\n\n<body pos=\"0 0 zero\"><joint/></body></worldbody></mujoco>");
    assert!(matches!(e.kind, MjcfErrorKind::BadNumber { ref attribute, .. } if attribute == "pos"));
    assert_eq!((e.line, e.element.as_str()), (3, "body"));
    assert!(e.to_string().contains("\"0 0 zero\""), "{e}");
    // Wrong count is also a bad number.
    let e = error_of("<mujoco><option gravity=\"0 -9.81\"/></mujoco>");
    assert!(matches!(e.kind, MjcfErrorKind::BadNumber { .. }));
}

#[test]
fn ball_joint_is_rejected_as_brax_does() {
    let e = error_of("<mujoco><worldbody>\n<body>\n<joint type=\"ball\"/></body></worldbody></mujoco>");
    assert!(matches!(e.kind, MjcfErrorKind::Unsupported(_)));
    assert_eq!((e.line, e.element.as_str()), (3, "joint"));
    assert!(e.to_string().contains("ball"), "{e}");
}

#[test]
fn missing_file_names_the_path() {
    let e = System::from_mjcf_file("/nonexistent/model.xml").unwrap_err();
    assert!(e.to_string().contains("/nonexistent/model.xml"), "{e}");
}

/// A model whose world body holds `bodies`, with `extra` elements after it.
fn world(bodies: &str, extra: &str) -> String {
    format!("<mujoco>\n<worldbody>\n{bodies}\n</worldbody>\n{extra}\n</mujoco>")
}

/// `error_of`, asserting the kind is `Invalid` (MuJoCo's compiler rejects the model), the line and
/// that the message contains `needle`.
fn invalid(xml: &str, line: u32, needle: &str) {
    let e = error_of(xml);
    assert!(matches!(e.kind, MjcfErrorKind::Invalid(_)), "{e}");
    assert_eq!(e.line, line, "{e}");
    assert!(e.to_string().contains(needle), "{e}");
}

const PENDULUM: &str =
    r#"<body name="pole" pos="0 0 1"><joint name="hinge" axis="0 1 0"/><geom size="0.1"/></body>"#;

#[test]
fn models_mujoco_rejects_are_errors_not_silently_different_physics() {
    // Regressions (bad-input hunt): each of these loaded and then simulated wrong numbers or NaN.
    // Geom sizes the type uses must be positive; masses and densities non-negative (MuJoCo).
    let geom = |attrs: &str| world(&format!("<body><joint/>\n<geom {attrs}/></body>"), "");
    invalid(&geom(r#"type="box" size="0.1""#), 4, "size 1 must be positive");
    invalid(&geom(r#"type="capsule" size="0.1""#), 4, "size 1 must be positive");
    invalid(&geom(r#"size="-0.1""#), 4, "size 0 must be positive");
    invalid(&geom(r#"size="0.1" mass="-1""#), 4, "negative");
    invalid(&geom(r#"size="0.1" density="-1000""#), 4, "negative");
    invalid(&geom(r#"size="0.1" condim="2""#), 4, "condim 2");
    let e = error_of(&geom(r#"size="nan""#));
    assert!(matches!(e.kind, MjcfErrorKind::BadNumber { .. }) && e.to_string().contains("finite"), "{e}");
    // A moving body needs mass and inertia above mjMINVAL: none at all, or a zero inertia.
    invalid(&world("<body pos=\"0 0 1\">\n<joint axis=\"0 1 0\"/></body>", ""), 3, "mjMINVAL");
    let inertial = r#"<inertial pos="0 0 0" mass="2" diaginertia="0 0 0"/>"#;
    invalid(&world(&format!("<body>\n<joint/>{inertial}</body>"), ""), 3, "principal inertias");
    invalid(
        &world(r#"<body><joint/><inertial pos="0 0 0" mass="-2" diaginertia="1 1 1"/></body>"#, ""),
        3,
        "negative",
    );
    // Free joints only on top-level bodies (the nested one started one parent offset away).
    let nested = "<body pos=\"0 0 1\"><joint/><geom size=\"0.1\"/>\n<body pos=\"1 0 0\">\n<freejoint/><geom size=\"0.1\"/></body></body>";
    let e = error_of(&world(nested, ""));
    assert!(matches!(e.kind, MjcfErrorKind::Invalid(_)) && e.to_string().contains("top level"), "{e}");
    assert_eq!((e.line, e.element.as_str()), (5, "freejoint"));
    // Planes only on static bodies; quaternions non-zero; names unique; `joint=""` names nothing.
    invalid(
        &world("<body><joint/><geom size=\"0.1\"/>\n<geom type=\"plane\" size=\"1 1 1\"/></body>", ""),
        4,
        "plane",
    );
    invalid(&world("<body quat=\"0 0 0 0\"><joint/><geom size=\"0.1\"/></body>", ""), 3, "zero quaternion");
    let twice = "<default class=\"a\"/>\n<default class=\"a\"/>";
    invalid(
        &format!("<mujoco><default>\n{twice}</default><worldbody/></mujoco>"),
        3,
        "repeated default class",
    );
    let two = format!("{PENDULUM}\n<body pos=\"1 0 0\"><joint name=\"hinge\"/><geom size=\"0.1\"/></body>");
    invalid(&world(&two, ""), 4, "repeated joint name");
    // A free joint's range is ignored, but still has to read as numbers.
    let free_range = world("<body><geom size=\"0.1\"/>\n<joint type=\"free\" range=\"a b\"/></body>", "");
    assert!(matches!(error_of(&free_range).kind, MjcfErrorKind::BadNumber { .. }));
    let unnamed =
        world("<body><joint/><geom size=\"0.1\"/></body>", "<actuator><motor joint=\"\"/></actuator>");
    assert!(matches!(error_of(&unnamed).kind, MjcfErrorKind::UnknownName { .. }));
}

#[test]
fn limited_auto_follows_mujoco_and_limited_ranges_must_be_increasing() {
    // Regression: `limited="auto"` meant "a range attribute is present", so `range="0 0"` locked the
    // joint and `range="30 -30"` gave a backwards limit (MuJoCo 4.0.1 leaves both unlimited), and
    // `limited="true"` without a range locked it (MuJoCo rejects it); `ctrlrange="1 -1"` turned a
    // control of 0.5 into -1. Each expectation below is what MuJoCo 4.0.1 does with the same XML.
    let joint =
        |attrs: &str| world(&format!("<body><geom size=\"0.1\"/>\n<joint name=\"j\" {attrs}/></body>"), "");
    let sys = System::from_mjcf_str("ok.xml", &joint(r#"range="0 0""#)).unwrap();
    assert!(!sys.joints.limited[0]);
    let sys = System::from_mjcf_str("ok.xml", &joint(r#"range="-30 30""#)).unwrap();
    assert!(sys.joints.limited[0]);
    close(sys.joints.range[0][1], PI / 6.0, 1e-12);
    let sys = System::from_mjcf_str("ok.xml", &joint(r#"range="-30 30" limited="false""#)).unwrap();
    assert!(!sys.joints.limited[0]);
    let sys = System::from_mjcf_str("ok.xml", &joint(r#"range="30 -30""#)).unwrap();
    assert!(!sys.joints.limited[0]);
    invalid(&joint(r#"limited="true""#), 4, "range[0] < range[1]");
    invalid(&joint(r#"limited="true" range="30 -30""#), 4, "range[0] < range[1]");
    let motor =
        |attrs: &str| world(PENDULUM, &format!("<actuator>\n<motor joint=\"hinge\" {attrs}/></actuator>"));
    invalid(&motor(r#"ctrllimited="true""#), 6, "ctrlrange");
    invalid(&motor(r#"ctrllimited="true" ctrlrange="1 -1""#), 6, "ctrlrange");
    invalid(&motor(r#"forcelimited="true" forcerange="2 2""#), 6, "forcerange");
    for attrs in [r#"ctrlrange="0 0""#, r#"ctrlrange="1 -1""#, r#"forcerange="2 2""#] {
        let sys = System::from_mjcf_str("ok.xml", &motor(attrs)).unwrap();
        assert!(!sys.actuators.ctrl_limited[0] && !sys.actuators.force_limited[0], "{attrs}");
    }
    let sys = System::from_mjcf_str("ok.xml", &motor(r#"ctrlrange="-1 2""#)).unwrap();
    assert!(sys.actuators.ctrl_limited[0] && sys.actuators.ctrl_range[0] == [-1.0, 2.0]);
}

#[test]
fn an_orientation_on_the_element_replaces_its_default_classs() {
    // Regression: a class's `euler` with the geom's own `quat` was "more than one of quat, euler,
    // axisangle"; MuJoCo 4.0.1 uses the geom's quat (identity here) and ignores the class's.
    let xml = "<mujoco><default><geom euler=\"0 0 90\"/></default><worldbody>\n<body><joint/>\
               <geom type=\"box\" size=\"0.1 0.2 0.3\" quat=\"1 0 0 0\"/>\
               <geom type=\"box\" size=\"0.1 0.2 0.3\"/></body></worldbody></mujoco>";
    let sys = System::from_mjcf_str("ok.xml", xml).unwrap();
    assert_eq!(sys.geoms.quat[0], [1.0, 0.0, 0.0, 0.0]);
    let half = std::f64::consts::FRAC_1_SQRT_2;
    let q = sys.geoms.quat[1];
    assert!((q[0] - half).abs() < 1e-12 && (q[3] - half).abs() < 1e-12, "the class's euler: {q:?}");
}

#[test]
fn models_the_pipelines_cannot_run_are_model_errors() {
    use kiln::prelude::DType;
    use kiln_sims::rigid::{Model, ModelError};
    let model = |xml: &str| Model::new(&System::from_mjcf_str("m.xml", xml).unwrap(), DType::F32);
    // Regression: an empty world loaded, then `init` panicked inside `stack`.
    for xml in ["<mujoco/>", "<mujoco><worldbody><geom type=\"plane\" size=\"1 1 1\"/></worldbody></mujoco>"]
    {
        assert!(matches!(model(xml), Err(ModelError::NoLinks)), "{xml}");
    }
    // Brax's custom checks: spring scales in [0, 1]; a global value has one number (the first was
    // kept silently).
    let custom = |c: &str| world(PENDULUM, &format!("<custom>{c}</custom>"));
    let e = model(&custom(r#"<numeric name="spring_mass_scale" data="2"/>"#)).unwrap_err();
    assert!(matches!(e, ModelError::CustomRange { value: 2.0, .. }), "{e}");
    let e = model(&custom(r#"<numeric name="baumgarte_erp" data="0.1 0.2"/>"#)).unwrap_err();
    assert_eq!(e.to_string(), "custom value `baumgarte_erp` has 2 numbers; expected 1");
    // An unnamed body is named by its link index.
    let e =
        model(&world("<body><joint/><joint type=\"slide\"/><geom size=\"0.1\"/></body>", "")).unwrap_err();
    assert!(e.to_string().starts_with("link `#0` has 2 joints"), "{e}");
}

#[test]
fn bodies_nested_past_the_depth_limit_are_an_error_not_a_stack_overflow() {
    // Regression: 6000 nested bodies overflowed the stack and aborted the process. 257 levels are
    // refused and 256 load, both on a thread with the default 2 MiB stack (the loader recurses per
    // level, so the limit must fit there).
    let body = "<body><joint/><geom size=\"0.1\"/>";
    let nested = |depth: usize| world(&format!("{}{}", body.repeat(depth), "</body>".repeat(depth)), "");
    let (deep, fits) = (nested(257), nested(256));
    let loaded = std::thread::spawn(move || {
        (System::from_mjcf_str("deep.xml", &deep).map(|_| ()), System::from_mjcf_str("ok.xml", &fits))
    })
    .join()
    .unwrap();
    let e = loaded.0.unwrap_err().to_string();
    assert!(e.contains("nested more than 256 deep"), "{e}");
    assert_eq!(loaded.1.unwrap().links.names.len(), 256);
}

/// The mass of the one link of `xml`, which must load.
fn link_mass(xml: &str) -> f64 {
    let sys = System::from_mjcf_str("ok.xml", xml).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sys.links.mass.len(), 1);
    sys.links.mass[0]
}

/// `error_of`, asserting the kind is `UnknownElement(tag)` on `line`.
fn unknown_element(xml: &str, line: u32, tag: &str) {
    let e = error_of(xml);
    assert!(matches!(e.kind, MjcfErrorKind::UnknownElement(ref n) if n == tag), "{e}");
    assert_eq!((e.line, e.element.as_str()), (line, tag), "{e}");
}

/// 1000 · 4/3 · π · 0.1³: a sphere of radius 0.1 at the default density.
const SPHERE_MASS: f64 = 4000.0 / 3.0 * PI * 1e-3;

#[test]
fn visual_and_statistic_are_skipped_where_mujoco_allows_them() {
    // Regression: `<visual>` and `<statistic>` (rendering and metadata; 3 of Brax 0.14's 11
    // environment models have a `<visual>`) were unsupported elements. MuJoCo 4.0.1 loads this
    // model with body mass 4.18879 (and warns that `meaninertia` "does not affect simulation").
    let top = "<visual><global offwidth=\"800\"/><map znear=\"0.02\" fogstart=\"3\"/></visual>\n\
               <statistic extent=\"2\" center=\"0 0 1\" meansize=\"0.1\" meanmass=\"3\" meaninertia=\"1\"/>";
    let xml = |extra: &str| format!("<mujoco>\n{extra}\n<worldbody>\n{PENDULUM}\n</worldbody>\n</mujoco>");
    close(link_mass(&xml(top)), SPHERE_MASS, 1e-12);
    // MuJoCo checks <statistic>: "extent must be strictly positive", "attribute 'center' does not
    // have enough data", "unrecognized attribute: 'foo'", "unrecognized element" (a child).
    invalid(&xml("\n<statistic extent=\"0\"/>"), 3, "extent must be strictly positive");
    let e = error_of(&xml("<statistic center=\"1 2\"/>"));
    assert!(matches!(e.kind, MjcfErrorKind::BadNumber { ref attribute, .. } if attribute == "center"), "{e}");
    let e = error_of(&xml("<statistic foo=\"1\"/>"));
    assert!(matches!(e.kind, MjcfErrorKind::UnknownAttribute(ref a) if a == "foo"), "{e}");
    unknown_element(&xml("<statistic>\n<foo/></statistic>"), 3, "foo");
    // Skipped only where MuJoCo's schema allows them ("Schema violation: unrecognized element"):
    // <visual>, <statistic>, <asset>, <size> only in <mujoco>; <site>, <camera>, <light> only in
    // bodies and <default>; <material>, <texture> only in <default> (and inside <asset>).
    let in_body = |el: &str| world(&format!("<body><joint/><geom size=\"0.1\"/>\n<{el}/></body>"), "");
    for el in ["visual", "statistic", "asset", "size"] {
        unknown_element(&in_body(el), 4, el);
        unknown_element(&format!("<mujoco><worldbody>\n<{el}/></worldbody></mujoco>"), 2, el);
        unknown_element(&format!("<mujoco><default>\n<{el}/></default></mujoco>"), 2, el);
    }
    for el in ["site", "camera", "light", "material", "texture"] {
        unknown_element(&xml(&format!("<{el}/>")), 2, el);
    }
    for el in ["material", "texture"] {
        unknown_element(&in_body(el), 4, el);
    }
    for el in ["site", "camera", "light"] {
        close(link_mass(&in_body(el)), SPHERE_MASS, 1e-12);
    }
    let dflt =
        "<default><site rgba=\"1 0 0 1\"/><camera fovy=\"30\"/><light/><material/><texture/></default>";
    close(link_mass(&xml(dflt)), SPHERE_MASS, 1e-12);
    // Elements MuJoCo accepts that can change the simulation or its state stay errors: contact
    // pairs and exclusions, equality constraints, keyframes (a start state), sensors (outputs kiln
    // does not compute; MuJoCo also checks what they refer to).
    for el in ["contact", "equality", "keyframe", "sensor"] {
        unknown_element(&xml(&format!("<{el}/>")), 2, el);
    }
}

#[test]
fn repeated_body_geom_and_actuator_names_are_errors() {
    // Regression: kiln loaded these; MuJoCo 4.0.1 refuses each with "repeated name 'a' in body"
    // (also for a jointless body merged into its parent, and for `world`, the world body's name),
    // "repeated name 'g' in geom", "repeated name 'm' in actuator".
    let geom = "<geom size=\"0.1\"/>";
    invalid(
        &world(&format!("<body name=\"a\"><joint/>{geom}\n<body name=\"a\">{geom}</body></body>"), ""),
        4,
        "repeated body name `a`",
    );
    invalid(
        &world(&format!("<body name=\"a\">{geom}</body>\n<body name=\"a\">{geom}</body>"), ""),
        4,
        "repeated body name `a`",
    );
    invalid(
        &world(&format!("<body name=\"world\"><joint/>{geom}</body>"), ""),
        3,
        "repeated body name `world`",
    );
    let geoms = "<geom name=\"g\" type=\"plane\" size=\"1 1 1\"/>\n\
                 <body><joint/><geom name=\"g\" size=\"0.1\"/></body>";
    let e = error_of(&world(geoms, ""));
    assert!(
        matches!(e.kind, MjcfErrorKind::Invalid(_)) && e.to_string().contains("repeated geom name `g`"),
        "{e}"
    );
    assert_eq!((e.line, e.element.as_str()), (4, "geom"));
    let motors =
        "<actuator>\n<motor name=\"m\" joint=\"hinge\"/>\n<motor name=\"m\" joint=\"hinge\"/></actuator>";
    let e = error_of(&world(PENDULUM, motors));
    assert!(
        matches!(e.kind, MjcfErrorKind::Invalid(_)) && e.to_string().contains("repeated actuator name `m`"),
        "{e}"
    );
    assert_eq!((e.line, e.element.as_str()), (7, "motor"));
    // Names are unique per kind: a body, joint, geom and actuator may share one; unnamed elements
    // repeat freely (MuJoCo loads both).
    let shared = "<body name=\"x\"><joint name=\"x\"/><geom name=\"x\" size=\"0.1\"/></body>";
    let sys = System::from_mjcf_str(
        "ok.xml",
        &world(shared, "<actuator><motor name=\"x\" joint=\"x\"/></actuator>"),
    )
    .unwrap();
    assert_eq!((sys.links.names.len(), sys.geoms.names.len(), sys.actuators.names.len()), (1, 1, 1));
    let unnamed = "<body name=\"\"><joint name=\"\"/><geom name=\"\" size=\"0.1\"/></body>";
    let sys = System::from_mjcf_str("ok.xml", &world(&unnamed.repeat(2), "")).unwrap();
    assert_eq!(sys.links.names.len(), 2);
    // A nested default class needs a name (MuJoCo: "empty class name"; kiln accepted one).
    invalid("<mujoco><default>\n<default class=\"\"/></default></mujoco>", 2, "empty class name");
}

#[test]
fn a_free_joint_inside_a_static_body_is_an_error() {
    // Regression: a jointless body is merged into the world, so a free joint below it looked
    // top-level and loaded; MuJoCo 4.0.1 refuses it: "free joint can only be used on top level".
    let geom = "<geom size=\"0.1\"/>";
    for (joint, tag) in [("<freejoint/>", "freejoint"), ("<joint type=\"free\"/>", "joint")] {
        for depth in [1, 2] {
            let (opening, closing) = ("<body pos=\"0 0 1\">\n".repeat(depth), "</body>".repeat(depth));
            let bodies = format!("{opening}{geom}<body pos=\"1 0 0\">\n{joint}{geom}</body>{closing}");
            let e = error_of(&world(&bodies, ""));
            assert!(
                matches!(e.kind, MjcfErrorKind::Invalid(_)) && e.to_string().contains("top level"),
                "{e}"
            );
            assert_eq!((e.line, e.element.as_str()), (4 + depth as u32, tag), "{e}");
        }
    }
    // Beside a static body, on a child of the world body, it loads (MuJoCo: nq 7).
    let sys = System::from_mjcf_str(
        "ok.xml",
        &world(&format!("<body>{geom}</body><body><freejoint/>{geom}</body>"), ""),
    )
    .unwrap();
    assert_eq!((sys.nq, sys.links.names.len()), (7, 1));
}

#[test]
fn geoms_outside_groups_0_to_5_give_no_mass() {
    // Regression: `group` was skipped as rendering-only, but MuJoCo leaves a geom outside its
    // default `inertiagrouprange="0 5"` out of the body's mass and inertia. MuJoCo 4.0.1's body mass
    // for each model below (two spheres of radius 0.1, the second with `attrs`):
    let two = |attrs: &str| {
        world(
            &format!("<body><joint/><geom size=\"0.1\"/><geom size=\"0.1\" pos=\"1 0 0\" {attrs}/></body>"),
            "",
        )
    };
    for (attrs, mass) in [
        ("group=\"0\"", 2.0 * SPHERE_MASS),
        ("group=\"5\"", 2.0 * SPHERE_MASS),
        ("group=\"3\" mass=\"2\"", SPHERE_MASS + 2.0),
        ("group=\"6\"", SPHERE_MASS),
        ("group=\"-1\"", SPHERE_MASS),
        ("group=\"7\" mass=\"2\"", SPHERE_MASS),
    ] {
        close(link_mass(&two(attrs)), mass, 1e-12);
    }
    // Only the outside geom's mass: the COM stays at the first sphere.
    let sys = System::from_mjcf_str("ok.xml", &two("group=\"6\"")).unwrap();
    assert_eq!(sys.links.com[0], [0.0; 3]);
    // From a default class too (MuJoCo: 4.18879).
    let dflt = "<mujoco><default><geom group=\"6\"/></default><worldbody><body><joint/>\
                <geom size=\"0.1\"/><geom size=\"0.1\" group=\"0\"/></body></worldbody></mujoco>";
    close(link_mass(dflt), SPHERE_MASS, 1e-12);
    // MuJoCo: "bad format in attribute 'group'"; "mass and inertia of moving bodies must be larger
    // than mjMINVAL" when the body's only geom is outside.
    let e = error_of(&two("group=\"1.5\""));
    assert!(matches!(e.kind, MjcfErrorKind::BadNumber { ref attribute, .. } if attribute == "group"), "{e}");
    invalid(&world("<body>\n<joint/><geom size=\"0.1\" group=\"6\"/></body>", ""), 3, "mjMINVAL");
}

#[test]
fn the_top_default_class_is_main_whatever_it_is_called() {
    // Regression: `<default class="">` at the top filed its settings under "", so they were never
    // applied (elements without a class use `main`). MuJoCo 4.0.1: density 500 there halves the
    // sphere's mass (2.0943951) with `class=""` or `class="main"`; another name is refused ("top-level
    // default class 'main' cannot be renamed").
    let model = |class: &str| {
        format!(
            "<mujoco>\n<default{class}><geom density=\"500\"/></default>\n<worldbody>\n{PENDULUM}\n</worldbody>\n</mujoco>"
        )
    };
    for class in ["", " class=\"\"", " class=\"main\""] {
        close(link_mass(&model(class)), SPHERE_MASS / 2.0, 1e-12);
    }
    invalid(&model(" class=\"foo\""), 2, "top-level default class `foo` cannot be renamed");
}
