//! Printing a function as text (grammar in the module doc of `text`).

use super::{INLINE_CONST_LIMIT, is_keyword};
use crate::canonical::var_order;
use crate::{Array, DType, Eqn, Function, IndexMode, Prim, Var};
use std::collections::HashMap;
use std::fmt::{self, Write};
use std::sync::Arc;

impl fmt::Display for Function {
    /// The text form. Constants of more than 16 elements print as `@name` (their data is dropped;
    /// see [`Function::to_text_with_consts`]); the alternate form `{:#}` prints them inline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut p = Printer { inline_all: f.alternate(), table: Vec::new(), out: String::new() };
        p.function(self, 0);
        f.write_str(&p.out)
    }
}

impl Function {
    /// The text form with constants of more than 16 elements printed as `@name`, and the table of
    /// those constants by name (names are unique across sub-functions). Parse it back with
    /// [`Function::parse_with_consts`].
    pub fn to_text_with_consts(&self) -> (String, Vec<(String, Arc<Array>)>) {
        let mut p = Printer { inline_all: false, table: Vec::new(), out: String::new() };
        p.function(self, 0);
        (p.out, p.table)
    }
}

/// The `n`-th name of JAX's scheme: `a`..`z`, `ba`, `bb`, ... (base 26, `a` as the digit 0).
fn encode_name(mut n: usize) -> String {
    let mut s = Vec::new();
    loop {
        s.push(b'a' + (n % 26) as u8);
        n /= 26;
        if n == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8(s).expect("ascii letters")
}

/// Names for every variable of `f`, in canonical order, skipping keywords.
fn names(f: &Function) -> HashMap<Var, String> {
    let mut next = 0;
    let mut fresh = || loop {
        let s = encode_name(next);
        next += 1;
        if !is_keyword(&s) {
            return s;
        }
    };
    var_order(f).into_iter().map(|v| (v, fresh())).collect()
}

struct Printer {
    /// Print every constant inline (the alternate `Display`).
    inline_all: bool,
    /// Out-of-line constants collected so far.
    table: Vec<(String, Arc<Array>)>,
    out: String,
}

/// One printed parameter value.
enum Param<'a> {
    Int(u64),
    Ints(&'a [usize]),
    SignedInts(&'a [i64]),
    DType(DType),
    Bool(bool),
    OptDType(Option<DType>),
    OptInt(Option<u64>),
    Mode(IndexMode),
    Fun(&'a Function),
    Funs(&'a [Function]),
}

/// The parameters of `p`, keyed by field name, sub-functions last.
fn params(p: &Prim) -> Vec<(&'static str, Param<'_>)> {
    use Param::*;
    let n = |x: &usize| Int(*x as u64);
    match p {
        Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::DynamicUpdateSlice
        | Prim::Threefry2x32
        | Prim::StopGradient => vec![],
        Prim::ConvertElementType { dtype } | Prim::BitcastConvertType { dtype } => {
            vec![("dtype", DType(*dtype))]
        }
        Prim::Iota { dtype, shape, dimension } => {
            vec![("dtype", DType(*dtype)), ("shape", Ints(shape.dims())), ("dimension", n(dimension))]
        }
        Prim::BroadcastInDim { shape, broadcast_dimensions } => {
            vec![("shape", Ints(shape.dims())), ("broadcast_dimensions", Ints(broadcast_dimensions))]
        }
        Prim::Reshape { new_sizes } => vec![("new_sizes", Ints(new_sizes.dims()))],
        Prim::Transpose { permutation } => vec![("permutation", Ints(permutation))],
        Prim::Rev { dimensions } => vec![("dimensions", Ints(dimensions))],
        Prim::Slice { start, limit, strides } => {
            vec![("start", Ints(start)), ("limit", Ints(limit)), ("strides", Ints(strides))]
        }
        Prim::DynamicSlice { slice_sizes } => vec![("slice_sizes", Ints(slice_sizes))],
        Prim::Concatenate { dimension } => vec![("dimension", n(dimension))],
        Prim::Pad { low, high, interior } => {
            vec![("low", SignedInts(low)), ("high", SignedInts(high)), ("interior", Ints(interior))]
        }
        Prim::Reduce { op: _, axes } => vec![("axes", Ints(axes))],
        Prim::ArgReduce { op: _, axis, index_dtype } => {
            vec![("axis", n(axis)), ("index_dtype", DType(*index_dtype))]
        }
        Prim::Cumulative { op: _, axis, reverse } => vec![("axis", n(axis)), ("reverse", Bool(*reverse))],
        Prim::Sort { dimension, num_keys } => vec![("dimension", n(dimension)), ("num_keys", n(num_keys))],
        Prim::DotGeneral {
            lhs_contracting,
            rhs_contracting,
            lhs_batch,
            rhs_batch,
            preferred_element_type,
        } => {
            vec![
                ("lhs_contracting", Ints(lhs_contracting)),
                ("rhs_contracting", Ints(rhs_contracting)),
                ("lhs_batch", Ints(lhs_batch)),
                ("rhs_batch", Ints(rhs_batch)),
                ("preferred_element_type", OptDType(*preferred_element_type)),
            ]
        }
        Prim::Gather { axis, batch_dims, mode } | Prim::Scatter { op: _, axis, batch_dims, mode } => {
            vec![("axis", n(axis)), ("batch_dims", n(batch_dims)), ("mode", Mode(*mode))]
        }
        Prim::SegmentSum { num_segments } => vec![("num_segments", n(num_segments))],
        Prim::CustomJvpCall { fun, jvp } => vec![("fun", Fun(fun)), ("jvp", Fun(jvp))],
        Prim::CustomVjpCall { fun, fwd, bwd } => {
            vec![("fun", Fun(fun)), ("fwd", Fun(fwd)), ("bwd", Fun(bwd))]
        }
        Prim::Scan { length, reverse, num_consts, num_carry, body } => vec![
            ("length", n(length)),
            ("reverse", Bool(*reverse)),
            ("num_consts", n(num_consts)),
            ("num_carry", n(num_carry)),
            ("body", Fun(body)),
        ],
        Prim::WhileLoop { cond, body, cond_consts, body_consts, max_iters } => vec![
            ("cond_consts", n(cond_consts)),
            ("body_consts", n(body_consts)),
            ("max_iters", OptInt(*max_iters)),
            ("cond", Fun(cond)),
            ("body", Fun(body)),
        ],
        Prim::Cond { branches } => vec![("branches", Funs(branches))],
        Prim::Call { body } | Prim::Checkpoint { body } => vec![("body", Fun(body))],
    }
}

/// A Python-style tuple: `()`, `(3,)`, `(0, 2)`.
fn tuple<T: fmt::Display>(out: &mut String, xs: &[T]) {
    out.push('(');
    for (i, x) in xs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{x}");
    }
    if xs.len() == 1 {
        out.push(',');
    }
    out.push(')');
}

/// `x` so that parsing gives the same bits back.
fn fmt_f32(x: f32) -> String {
    match x.is_nan() {
        true if x.to_bits() == f32::NAN.to_bits() => "nan".into(),
        true => format!("f32bits({:#010x})", x.to_bits()),
        false => format!("{x:?}"),
    }
}

fn fmt_f64(x: f64) -> String {
    match x.is_nan() {
        true if x.to_bits() == f64::NAN.to_bits() => "nan".into(),
        true => format!("f64bits({:#018x})", x.to_bits()),
        false => format!("{x:?}"),
    }
}

/// The elements of `a`, row-major.
fn elements(a: &Array) -> Vec<String> {
    match a {
        Array::F32(a) => a.iter().map(|x| fmt_f32(*x)).collect(),
        Array::F64(a) => a.iter().map(|x| fmt_f64(*x)).collect(),
        Array::I32(a) => a.iter().map(|x| x.to_string()).collect(),
        Array::U32(a) => a.iter().map(|x| x.to_string()).collect(),
        Array::Bool(a) => a.iter().map(|x| x.to_string()).collect(),
    }
}

/// `name:type` where `v` is defined.
fn binder(f: &Function, names: &HashMap<Var, String>, v: &Var) -> String {
    match f.vars.get(v.index()) {
        Some(t) => format!("{}:{t}", names[v]),
        // An invalid id: print something the parser rejects rather than panic.
        None => format!("{}:invalid[]", names[v]),
    }
}

impl Printer {
    /// Prints `f`, whose opening line is indented by `indent` spaces (already written).
    fn function(&mut self, f: &Function, indent: usize) {
        let names = names(f);
        let name = |v: &Var| names[v].clone();
        let binder = |v: &Var| binder(f, &names, v);
        self.out.push_str("{ lambda");
        for p in &f.params {
            let _ = write!(self.out, " {}", binder(p));
        }
        if !f.consts.is_empty() {
            self.out.push_str(" ;");
            for (i, c) in f.consts.iter().enumerate() {
                let sep = if i > 0 { "," } else { "" };
                // The value's own type: the var's type for a valid function, and what parses
                // back to the same constant when a lenient parse bound its name twice.
                let _ = write!(self.out, "{sep} {}:{} = ", name(&c.var), c.value.ty());
                self.const_value(&name(&c.var), &c.value);
            }
        }
        self.out.push_str(" . let");
        for e in &f.eqns {
            let _ = write!(self.out, "\n{:1$}", "", indent + 4);
            self.eqn(e, indent + 4, f, &names);
        }
        if !f.eqns.is_empty() {
            let _ = write!(self.out, "\n{:1$}", "", indent + 2);
        } else {
            self.out.push(' ');
        }
        self.out.push_str("in ");
        tuple(&mut self.out, &f.outputs.iter().map(name).collect::<Vec<_>>());
        self.out.push_str(" }");
    }

    fn eqn(&mut self, e: &Eqn, indent: usize, f: &Function, names: &HashMap<Var, String>) {
        if e.outputs.is_empty() {
            self.out.push_str("()");
        }
        let outs: Vec<String> = e.outputs.iter().map(|v| binder(f, names, v)).collect();
        let _ = write!(self.out, "{} = {}", outs.join(" "), e.prim.name());
        let ps = params(&e.prim);
        if !ps.is_empty() {
            self.out.push('[');
            for (i, (key, value)) in ps.into_iter().enumerate() {
                if i > 0 {
                    self.out.push(' ');
                }
                let _ = write!(self.out, "{key}=");
                self.param(value, indent);
            }
            self.out.push(']');
        }
        for v in &e.inputs {
            let _ = write!(self.out, " {}", names[v]);
        }
        if let Some(loc) = &e.loc {
            let _ = write!(self.out, "  @{:?}:{}:{}", &*loc.file, loc.line, loc.column);
        }
    }

    fn param(&mut self, value: Param<'_>, indent: usize) {
        let out = &mut self.out;
        match value {
            Param::Int(x) => {
                let _ = write!(out, "{x}");
            }
            Param::Ints(xs) => tuple(out, xs),
            Param::SignedInts(xs) => tuple(out, xs),
            Param::DType(d) => out.push_str(d.name()),
            Param::Bool(b) => {
                let _ = write!(out, "{b}");
            }
            Param::OptDType(d) => out.push_str(d.map_or("none", DType::name)),
            Param::OptInt(x) => {
                let _ = match x {
                    Some(x) => write!(out, "{x}"),
                    None => write!(out, "none"),
                };
            }
            Param::Mode(m) => out.push_str(m.name()),
            Param::Fun(f) => self.function(f, indent),
            Param::Funs(fs) => {
                self.out.push('[');
                for (i, f) in fs.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.function(f, indent);
                }
                self.out.push(']');
            }
        }
    }

    /// A constant's value: inline, or `@name` with the data put in the table.
    fn const_value(&mut self, var_name: &str, value: &Arc<Array>) {
        if !self.inline_all && value.len() > INLINE_CONST_LIMIT {
            // Sub-functions reuse variable names, so make the table's names unique.
            let taken = |s: &str| self.table.iter().any(|(n, _)| n == s);
            let mut key = var_name.to_string();
            let mut k = 2;
            while taken(&key) {
                key = format!("{var_name}_{k}");
                k += 1;
            }
            let _ = write!(self.out, "@{key}");
            self.table.push((key, value.clone()));
        } else if value.shape().rank() == 0 {
            self.out.push_str(&elements(value).join(""));
        } else {
            let _ = write!(self.out, "[{}]", elements(value).join(", "));
        }
    }
}
