//! Parsing the text form (grammar in the module doc of `text`).
//!
//! Two steps per function: a recursive-descent pass reads parameters, constants and equations with
//! their names, then the names are resolved over the whole function (definitions first, so uses may
//! precede them — the verifier, not the parser, reports SSA violations).

use super::is_keyword;
use crate::{
    ArgOp, Array, BinaryOp, CompareOp, ConstDef, CumulativeOp, DType, Element, Eqn, Function, IndexMode,
    Prim, ReduceOp, ScatterOp, Shape, SrcLoc, TensorType, UnaryOp, Var,
};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

/// A syntax or type error in IR text, with its 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
    /// What is wrong, lowercase, naming the offending token.
    pub message: String,
}

/// Parses the text printed by `Function`'s `Display`. Out-of-line constants (`@name`) are errors;
/// use [`Function::parse_with_consts`] for those.
///
/// # Errors
/// A [`ParseError`] with the line and column of the first problem.
pub fn parse(src: &str) -> Result<Function, ParseError> {
    Function::parse_with_consts(src, &[])
}

impl Function {
    /// Parses text whose `@name` constants are looked up in `consts` (as returned by
    /// [`Function::to_text_with_consts`]).
    ///
    /// # Errors
    /// A [`ParseError`] with the line and column of the first problem, including an `@name` missing
    /// from `consts` or whose array does not have the declared type.
    pub fn parse_with_consts(src: &str, consts: &[(String, Arc<Array>)]) -> Result<Function, ParseError> {
        let mut p = Parser { toks: lex(src)?, pos: 0, table: consts, depth: 0, templates: templates() };
        let f = p.function()?;
        let t = p.peek();
        if t.tok != Tok::Eof {
            return Err(p.err(&t, format!("unexpected {} after the function", describe(&t.tok))));
        }
        Ok(f)
    }
}

impl std::str::FromStr for Function {
    type Err = ParseError;
    /// [`parse`].
    fn from_str(s: &str) -> Result<Function, ParseError> {
        parse(s)
    }
}

/// Deeper nesting of functions and parameter lists than this is an error (instead of a stack
/// overflow on hostile input).
const MAX_DEPTH: usize = 64;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// Starts with a digit; validated where it is used.
    Num(String),
    /// A string literal, escapes resolved.
    Str(String),
    Punct(char),
    Eof,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
    col: usize,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) | Tok::Num(s) => format!("`{s}`"),
        Tok::Str(s) => format!("string {s:?}"),
        Tok::Punct(c) => format!("`{c}`"),
        Tok::Eof => "end of input".into(),
    }
}

fn lex(src: &str) -> Result<Vec<Token>, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let (mut i, mut line, mut col) = (0, 1, 1);
    let err = |line, column, message: String| ParseError { line, column, message };
    while i < chars.len() {
        let c = chars[i];
        let (l0, c0, start) = (line, col, i);
        if c == '\n' {
            line += 1;
            col = 1;
            i += 1;
            continue;
        }
        // Every other token stays on one line, so the column advances by the characters taken.
        let tok = if c.is_whitespace() {
            i += 1;
            None
        } else if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            None
        } else if c.is_ascii_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            Some(Tok::Ident(chars[start..i].iter().collect()))
        } else if c.is_ascii_digit() {
            // Digits, letters (exponents, hex), `.`, and a sign right after an exponent's `e`.
            let hex = chars.get(i + 1).is_some_and(|c| *c == 'x' || *c == 'X');
            i += 1;
            while i < chars.len() {
                let d = chars[i];
                let exp_sign = (d == '+' || d == '-') && !hex && matches!(chars[i - 1], 'e' | 'E');
                if d.is_ascii_alphanumeric() || d == '.' || d == '_' || exp_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            Some(Tok::Num(chars[start..i].iter().collect()))
        } else if c == '"' {
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None | Some('\n') => return Err(err(l0, c0, "unterminated string".into())),
                    Some('"') => {
                        i += 1;
                        break;
                    }
                    Some('\\') => {
                        let (ch, len) = unescape(&chars[i..])
                            .ok_or_else(|| err(line, col + (i - start), "invalid escape in string".into()))?;
                        s.push(ch);
                        i += len;
                    }
                    Some(ch) => {
                        s.push(*ch);
                        i += 1;
                    }
                }
            }
            Some(Tok::Str(s))
        } else if "{}[](),:;=.@-".contains(c) {
            i += 1;
            Some(Tok::Punct(c))
        } else {
            return Err(err(line, col, format!("unexpected character `{c}`")));
        };
        col += i - start;
        if let Some(tok) = tok {
            toks.push(Token { tok, line: l0, col: c0 });
        }
    }
    toks.push(Token { tok: Tok::Eof, line, col });
    Ok(toks)
}

/// The character of the escape at the start of `s` (which begins with `\`) and its length — the
/// escapes Rust's `{:?}` prints.
fn unescape(s: &[char]) -> Option<(char, usize)> {
    let simple = match s.get(1)? {
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        '0' => '\0',
        '\\' => '\\',
        '"' => '"',
        '\'' => '\'',
        'u' => {
            if s.get(2) != Some(&'{') {
                return None;
            }
            let close = s.iter().take(12).position(|c| *c == '}')?;
            let hex: String = s[3..close].iter().collect();
            let ch = char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?;
            return Some((ch, close + 1));
        }
        _ => return None,
    };
    Some((simple, 2))
}

/// One instance of every primitive (family ops expanded), with placeholder parameters: the parser
/// finds a primitive by [`Prim::name`] here, so names live only in `prim.rs`.
fn templates() -> Vec<Prim> {
    let f = || Box::new(Function::new());
    let mut v: Vec<Prim> = Vec::new();
    v.extend(UnaryOp::ALL.map(Prim::Unary));
    v.extend(BinaryOp::ALL.map(Prim::Binary));
    v.extend(CompareOp::ALL.map(Prim::Compare));
    v.extend(ReduceOp::ALL.map(|op| Prim::Reduce { op, axes: vec![] }));
    v.extend(ArgOp::ALL.map(|op| Prim::ArgReduce { op, axis: 0, index_dtype: DType::I32 }));
    v.extend(CumulativeOp::ALL.map(|op| Prim::Cumulative { op, axis: 0, reverse: false }));
    let (clip, d, f32) = (IndexMode::Clip, Vec::new, DType::F32);
    v.extend(ScatterOp::ALL.map(|op| Prim::Scatter { op, axis: 0, batch_dims: 0, mode: clip }));
    v.extend([
        Prim::Select,
        Prim::Clamp,
        Prim::ConvertElementType { dtype: f32 },
        Prim::BitcastConvertType { dtype: f32 },
        Prim::Iota { dtype: f32, shape: Shape::scalar(), dimension: 0 },
        Prim::BroadcastInDim { shape: Shape::scalar(), broadcast_dimensions: d() },
        Prim::Reshape { new_sizes: Shape::scalar() },
        Prim::Transpose { permutation: d() },
        Prim::Rev { dimensions: d() },
        Prim::Slice { start: d(), limit: d(), strides: d() },
        Prim::DynamicSlice { slice_sizes: d() },
        Prim::DynamicUpdateSlice,
        Prim::Concatenate { dimension: 0 },
        Prim::Pad { low: vec![], high: vec![], interior: d() },
        Prim::Sort { dimension: 0, num_keys: 1 },
        Prim::DotGeneral {
            lhs_contracting: d(),
            rhs_contracting: d(),
            lhs_batch: d(),
            rhs_batch: d(),
            preferred_element_type: None,
        },
        Prim::Gather { axis: 0, batch_dims: 0, mode: clip },
        Prim::SegmentSum { num_segments: 0 },
        Prim::Threefry2x32,
        Prim::StopGradient,
        Prim::CustomJvpCall { fun: f(), jvp: f() },
        Prim::CustomVjpCall { fun: f(), fwd: f(), bwd: f() },
        Prim::Scan { length: 0, reverse: false, num_consts: 0, num_carry: 0, body: f() },
        Prim::WhileLoop { cond: f(), body: f(), cond_consts: 0, body_consts: 0, max_iters: None },
        Prim::Cond { branches: vec![] },
        Prim::Call { body: f() },
        Prim::Checkpoint { body: f() },
    ]);
    v
}

/// A name where it occurs, for resolution errors.
struct NameRef {
    name: String,
    line: usize,
    col: usize,
}

/// An equation before name resolution.
struct RawEqn {
    prim: Prim,
    inputs: Vec<NameRef>,
    outputs: Vec<(NameRef, TensorType)>,
    loc: Option<SrcLoc>,
}

/// A parameter value before it is interpreted by the primitive's fields.
enum PVal {
    /// Digits; `neg` when written with a leading `-`.
    Num {
        text: String,
        neg: bool,
    },
    Ident(String),
    /// `( ... )`
    Tuple(Vec<Spanned>),
    /// `[ ... ]`
    List(Vec<Spanned>),
    Fun(Function),
}

struct Spanned {
    val: PVal,
    line: usize,
    col: usize,
}

/// The `key=value` pairs of one equation, consumed field by field.
struct Params {
    prim: String,
    line: usize,
    col: usize,
    items: Vec<(NameRef, Spanned)>,
}

fn err_at(line: usize, column: usize, message: String) -> ParseError {
    ParseError { line, column, message }
}

impl Params {
    fn take(&mut self, key: &str) -> Result<Spanned, ParseError> {
        match self.items.iter().position(|(k, _)| k.name == key) {
            Some(i) => Ok(self.items.remove(i).1),
            None => Err(err_at(self.line, self.col, format!("missing parameter `{key}` of `{}`", self.prim))),
        }
    }

    fn bad(&self, key: &str, v: &Spanned, what: &str) -> ParseError {
        err_at(v.line, v.col, format!("parameter `{key}` of `{}` must be {what}", self.prim))
    }

    fn int_of(&self, key: &str, v: &Spanned) -> Result<u64, ParseError> {
        match &v.val {
            PVal::Num { text, neg: false } => text.parse().map_err(|_| self.bad(key, v, "an integer")),
            _ => Err(self.bad(key, v, "an integer")),
        }
    }

    fn signed_of(&self, key: &str, v: &Spanned) -> Result<i64, ParseError> {
        match &v.val {
            PVal::Num { text, neg } => {
                let mag: i128 = text.parse().map_err(|_| self.bad(key, v, "a list of integers"))?;
                i64::try_from(if *neg { -mag } else { mag })
                    .map_err(|_| self.bad(key, v, "a list of integers"))
            }
            _ => Err(self.bad(key, v, "a list of integers")),
        }
    }

    fn usize(&mut self, key: &str) -> Result<usize, ParseError> {
        let v = self.take(key)?;
        usize::try_from(self.int_of(key, &v)?).map_err(|_| self.bad(key, &v, "an integer"))
    }

    fn usizes(&mut self, key: &str) -> Result<Vec<usize>, ParseError> {
        let v = self.take(key)?;
        let PVal::Tuple(xs) = &v.val else { return Err(self.bad(key, &v, "a tuple of integers")) };
        xs.iter()
            .map(|x| {
                let n = self.int_of(key, x).map_err(|_| self.bad(key, x, "a tuple of integers"))?;
                usize::try_from(n).map_err(|_| self.bad(key, x, "a tuple of integers"))
            })
            .collect()
    }

    fn i64s(&mut self, key: &str) -> Result<Vec<i64>, ParseError> {
        let v = self.take(key)?;
        let PVal::Tuple(xs) = &v.val else { return Err(self.bad(key, &v, "a tuple of integers")) };
        xs.iter().map(|x| self.signed_of(key, x)).collect()
    }

    fn shape(&mut self, key: &str) -> Result<Shape, ParseError> {
        self.usizes(key).map(Shape::from)
    }

    fn ident(&mut self, key: &str, what: &str) -> Result<(String, Spanned), ParseError> {
        let v = self.take(key)?;
        match &v.val {
            PVal::Ident(s) => Ok((s.clone(), v)),
            _ => Err(self.bad(key, &v, what)),
        }
    }

    fn dtype(&mut self, key: &str) -> Result<DType, ParseError> {
        let (s, v) = self.ident(key, "a dtype")?;
        DType::from_name(&s).ok_or_else(|| self.bad(key, &v, "a dtype"))
    }

    fn opt_dtype(&mut self, key: &str) -> Result<Option<DType>, ParseError> {
        let what = "a dtype or `none`";
        let (s, v) = self.ident(key, what)?;
        if s == "none" {
            Ok(None)
        } else {
            DType::from_name(&s).map(Some).ok_or_else(|| self.bad(key, &v, what))
        }
    }

    fn opt_u64(&mut self, key: &str) -> Result<Option<u64>, ParseError> {
        let v = self.take(key)?;
        match &v.val {
            PVal::Ident(s) if s == "none" => Ok(None),
            _ => self.int_of(key, &v).map(Some).map_err(|_| self.bad(key, &v, "an integer or `none`")),
        }
    }

    fn bool(&mut self, key: &str) -> Result<bool, ParseError> {
        let (s, v) = self.ident(key, "`true` or `false`")?;
        match s.as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(self.bad(key, &v, "`true` or `false`")),
        }
    }

    fn mode(&mut self, key: &str) -> Result<IndexMode, ParseError> {
        let (s, v) = self.ident(key, "`clip` or `fill`")?;
        [IndexMode::Clip, IndexMode::FillOrDrop]
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| self.bad(key, &v, "`clip` or `fill`"))
    }

    fn fun(&mut self, key: &str) -> Result<Box<Function>, ParseError> {
        let v = self.take(key)?;
        match v.val {
            PVal::Fun(f) => Ok(Box::new(f)),
            _ => Err(self.bad(key, &v, "a function `{ lambda ... }`")),
        }
    }

    fn funs(&mut self, key: &str) -> Result<Vec<Function>, ParseError> {
        let v = self.take(key)?;
        let what = "a list of functions `[{ lambda ... }, ...]`";
        let PVal::List(items) = v.val else { return Err(self.bad(key, &v, what)) };
        items
            .into_iter()
            .map(|x| match x.val {
                PVal::Fun(f) => Ok(f),
                _ => Err(self.bad(key, &x, what)),
            })
            .collect()
    }

    /// Errors on a parameter the primitive does not have.
    fn finish(self) -> Result<(), ParseError> {
        match self.items.first() {
            Some((k, _)) => {
                Err(err_at(k.line, k.col, format!("unknown parameter `{}` of `{}`", k.name, self.prim)))
            }
            None => Ok(()),
        }
    }
}

/// `template` (found by name) with its fields read from `ps`.
fn fill(template: Prim, ps: &mut Params) -> Result<Prim, ParseError> {
    Ok(match template {
        Prim::Unary(op) => Prim::Unary(op),
        Prim::Binary(op) => Prim::Binary(op),
        Prim::Compare(op) => Prim::Compare(op),
        Prim::Select => Prim::Select,
        Prim::Clamp => Prim::Clamp,
        Prim::DynamicUpdateSlice => Prim::DynamicUpdateSlice,
        Prim::Threefry2x32 => Prim::Threefry2x32,
        Prim::StopGradient => Prim::StopGradient,
        Prim::ConvertElementType { .. } => Prim::ConvertElementType { dtype: ps.dtype("dtype")? },
        Prim::BitcastConvertType { .. } => Prim::BitcastConvertType { dtype: ps.dtype("dtype")? },
        Prim::Iota { .. } => Prim::Iota {
            dtype: ps.dtype("dtype")?,
            shape: ps.shape("shape")?,
            dimension: ps.usize("dimension")?,
        },
        Prim::BroadcastInDim { .. } => Prim::BroadcastInDim {
            shape: ps.shape("shape")?,
            broadcast_dimensions: ps.usizes("broadcast_dimensions")?,
        },
        Prim::Reshape { .. } => Prim::Reshape { new_sizes: ps.shape("new_sizes")? },
        Prim::Transpose { .. } => Prim::Transpose { permutation: ps.usizes("permutation")? },
        Prim::Rev { .. } => Prim::Rev { dimensions: ps.usizes("dimensions")? },
        Prim::Slice { .. } => Prim::Slice {
            start: ps.usizes("start")?,
            limit: ps.usizes("limit")?,
            strides: ps.usizes("strides")?,
        },
        Prim::DynamicSlice { .. } => Prim::DynamicSlice { slice_sizes: ps.usizes("slice_sizes")? },
        Prim::Concatenate { .. } => Prim::Concatenate { dimension: ps.usize("dimension")? },
        Prim::Pad { .. } => {
            Prim::Pad { low: ps.i64s("low")?, high: ps.i64s("high")?, interior: ps.usizes("interior")? }
        }
        Prim::Reduce { op, .. } => Prim::Reduce { op, axes: ps.usizes("axes")? },
        Prim::ArgReduce { op, .. } => {
            Prim::ArgReduce { op, axis: ps.usize("axis")?, index_dtype: ps.dtype("index_dtype")? }
        }
        Prim::Cumulative { op, .. } => {
            Prim::Cumulative { op, axis: ps.usize("axis")?, reverse: ps.bool("reverse")? }
        }
        Prim::Sort { .. } => {
            Prim::Sort { dimension: ps.usize("dimension")?, num_keys: ps.usize("num_keys")? }
        }
        Prim::DotGeneral { .. } => Prim::DotGeneral {
            lhs_contracting: ps.usizes("lhs_contracting")?,
            rhs_contracting: ps.usizes("rhs_contracting")?,
            lhs_batch: ps.usizes("lhs_batch")?,
            rhs_batch: ps.usizes("rhs_batch")?,
            preferred_element_type: ps.opt_dtype("preferred_element_type")?,
        },
        Prim::Gather { .. } => Prim::Gather {
            axis: ps.usize("axis")?,
            batch_dims: ps.usize("batch_dims")?,
            mode: ps.mode("mode")?,
        },
        Prim::Scatter { op, .. } => Prim::Scatter {
            op,
            axis: ps.usize("axis")?,
            batch_dims: ps.usize("batch_dims")?,
            mode: ps.mode("mode")?,
        },
        Prim::SegmentSum { .. } => Prim::SegmentSum { num_segments: ps.usize("num_segments")? },
        Prim::CustomJvpCall { .. } => Prim::CustomJvpCall { fun: ps.fun("fun")?, jvp: ps.fun("jvp")? },
        Prim::CustomVjpCall { .. } => {
            Prim::CustomVjpCall { fun: ps.fun("fun")?, fwd: ps.fun("fwd")?, bwd: ps.fun("bwd")? }
        }
        Prim::Scan { .. } => Prim::Scan {
            length: ps.usize("length")?,
            reverse: ps.bool("reverse")?,
            num_consts: ps.usize("num_consts")?,
            num_carry: ps.usize("num_carry")?,
            body: ps.fun("body")?,
        },
        Prim::WhileLoop { .. } => Prim::WhileLoop {
            cond_consts: ps.usize("cond_consts")?,
            body_consts: ps.usize("body_consts")?,
            max_iters: ps.opt_u64("max_iters")?,
            cond: ps.fun("cond")?,
            body: ps.fun("body")?,
        },
        Prim::Cond { .. } => Prim::Cond { branches: ps.funs("branches")? },
        Prim::Call { .. } => Prim::Call { body: ps.fun("body")? },
        Prim::Checkpoint { .. } => Prim::Checkpoint { body: ps.fun("body")? },
    })
}

struct Parser<'t> {
    toks: Vec<Token>,
    pos: usize,
    table: &'t [(String, Arc<Array>)],
    depth: usize,
    templates: Vec<Prim>,
}

impl Parser<'_> {
    fn peek(&self) -> Token {
        self.peek_at(0)
    }

    fn peek_at(&self, k: usize) -> Token {
        // The last token is `Eof`, which `next` never steps over.
        let last = self.toks.len() - 1;
        self.toks[(self.pos + k).min(last)].clone()
    }

    fn next(&mut self) -> Token {
        let t = self.peek();
        if t.tok != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    fn err(&self, t: &Token, message: String) -> ParseError {
        err_at(t.line, t.col, message)
    }

    fn is_punct(&self, c: char) -> bool {
        self.peek().tok == Tok::Punct(c)
    }

    fn eat_punct(&mut self, c: char) -> bool {
        let yes = self.is_punct(c);
        if yes {
            self.next();
        }
        yes
    }

    fn expect_punct(&mut self, c: char) -> Result<Token, ParseError> {
        let t = self.next();
        if t.tok == Tok::Punct(c) {
            Ok(t)
        } else {
            Err(self.err(&t, format!("expected `{c}`, found {}", describe(&t.tok))))
        }
    }

    fn is_keyword(&self, k: usize, kw: &str) -> bool {
        matches!(&self.peek_at(k).tok, Tok::Ident(s) if s == kw)
    }

    fn expect_keyword(&mut self, kw: &str) -> Result<(), ParseError> {
        let t = self.next();
        match &t.tok {
            Tok::Ident(s) if s == kw => Ok(()),
            other => Err(self.err(&t, format!("expected `{kw}`, found {}", describe(other)))),
        }
    }

    /// A variable name starts at `k` tokens ahead.
    fn at_name(&self, k: usize) -> bool {
        matches!(&self.peek_at(k).tok, Tok::Ident(s) if !is_keyword(s))
    }

    fn name(&mut self) -> Result<NameRef, ParseError> {
        let t = self.next();
        match &t.tok {
            Tok::Ident(s) if !is_keyword(s) => Ok(NameRef { name: s.clone(), line: t.line, col: t.col }),
            other => Err(self.err(&t, format!("expected a variable name, found {}", describe(other)))),
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(&self.peek(), "nesting too deep".into()));
        }
        Ok(())
    }

    fn function(&mut self) -> Result<Function, ParseError> {
        self.enter()?;
        self.expect_punct('{')?;
        self.expect_keyword("lambda")?;
        let mut params = Vec::new();
        while self.at_name(0) {
            params.push(self.binder()?);
        }
        let mut consts = Vec::new();
        if self.eat_punct(';') {
            while self.at_name(0) {
                let (name, ty) = self.binder()?;
                self.expect_punct('=')?;
                let value = self.const_value(&ty)?;
                consts.push((name, ty, value));
                if !self.eat_punct(',') {
                    break;
                }
            }
        }
        self.expect_punct('.')?;
        self.expect_keyword("let")?;
        let mut eqns = Vec::new();
        while !self.is_keyword(0, "in") {
            eqns.push(self.eqn()?);
        }
        self.next();
        self.expect_punct('(')?;
        let mut outputs = Vec::new();
        while !self.is_punct(')') {
            outputs.push(self.name()?);
            if !self.eat_punct(',') {
                break;
            }
        }
        self.expect_punct(')')?;
        self.expect_punct('}')?;
        self.depth -= 1;
        resolve(params, consts, eqns, outputs)
    }

    /// `name:type`
    fn binder(&mut self) -> Result<(NameRef, TensorType), ParseError> {
        let name = self.name()?;
        self.expect_punct(':')?;
        Ok((name, self.ty()?))
    }

    fn ty(&mut self) -> Result<TensorType, ParseError> {
        let t = self.next();
        let dtype = match &t.tok {
            Tok::Ident(s) => {
                DType::from_name(s).ok_or_else(|| self.err(&t, format!("unknown dtype `{s}`")))?
            }
            other => return Err(self.err(&t, format!("expected a dtype, found {}", describe(other)))),
        };
        self.expect_punct('[')?;
        let mut dims = Vec::new();
        if !self.eat_punct(']') {
            loop {
                dims.push(self.usize()?);
                if self.eat_punct(']') {
                    break;
                }
                self.expect_punct(',')?;
            }
        }
        Ok(TensorType::new(dtype, dims))
    }

    fn usize(&mut self) -> Result<usize, ParseError> {
        let t = self.next();
        match &t.tok {
            Tok::Num(s) => s.parse().map_err(|_| self.err(&t, format!("malformed integer `{s}`"))),
            other => Err(self.err(&t, format!("expected an integer, found {}", describe(other)))),
        }
    }

    fn eqn(&mut self) -> Result<RawEqn, ParseError> {
        let mut outputs = Vec::new();
        if self.eat_punct('(') {
            self.expect_punct(')')?;
        } else {
            if !self.at_name(0) {
                let t = self.peek();
                return Err(self.err(&t, format!("expected an equation or `in`, found {}", describe(&t.tok))));
            }
            while !self.is_punct('=') {
                outputs.push(self.binder()?);
            }
        }
        self.expect_punct('=')?;
        let t = self.next();
        let Tok::Ident(name) = &t.tok else {
            return Err(self.err(&t, format!("expected a primitive, found {}", describe(&t.tok))));
        };
        let template = self.templates.iter().find(|p| p.name() == name).cloned();
        let template = template.ok_or_else(|| self.err(&t, format!("unknown primitive `{name}`")))?;
        let mut ps = Params { prim: name.clone(), line: t.line, col: t.col, items: Vec::new() };
        if self.eat_punct('[') {
            while !self.eat_punct(']') {
                let key = self.name()?;
                if ps.items.iter().any(|(k, _)| k.name == key.name) {
                    return Err(err_at(key.line, key.col, format!("duplicate parameter `{}`", key.name)));
                }
                self.expect_punct('=')?;
                let v = self.pval()?;
                ps.items.push((key, v));
                self.eat_punct(',');
            }
        }
        let prim = fill(template, &mut ps)?;
        ps.finish()?;
        let mut inputs = Vec::new();
        // An operand is a name not followed by `:` (which would start the next equation).
        while self.at_name(0) && self.peek_at(1).tok != Tok::Punct(':') {
            inputs.push(self.name()?);
        }
        let loc = if self.eat_punct('@') { Some(self.loc()?) } else { None };
        Ok(RawEqn { prim, inputs, outputs, loc })
    }

    /// `"file":line:col` after the `@`.
    fn loc(&mut self) -> Result<SrcLoc, ParseError> {
        let t = self.next();
        let Tok::Str(file) = &t.tok else {
            return Err(
                self.err(&t, format!("expected a location `\"file\":line:col`, found {}", describe(&t.tok)))
            );
        };
        let num = |p: &mut Self| -> Result<u32, ParseError> {
            p.expect_punct(':')?;
            let n = p.usize()?;
            u32::try_from(n).map_err(|_| err_at(t.line, t.col, format!("location number `{n}` out of range")))
        };
        let line = num(self)?;
        let column = num(self)?;
        Ok(SrcLoc { file: Arc::from(file.as_str()), line, column })
    }

    fn pval(&mut self) -> Result<Spanned, ParseError> {
        self.enter()?;
        let t = self.peek();
        let val = match &t.tok {
            Tok::Punct('(') | Tok::Punct('[') => {
                let (open, close) = if t.tok == Tok::Punct('(') { ('(', ')') } else { ('[', ']') };
                self.expect_punct(open)?;
                let mut items = Vec::new();
                while !self.is_punct(close) {
                    items.push(self.pval()?);
                    if !self.eat_punct(',') {
                        break;
                    }
                }
                self.expect_punct(close)?;
                if open == '(' { PVal::Tuple(items) } else { PVal::List(items) }
            }
            Tok::Punct('{') => PVal::Fun(self.function()?),
            Tok::Punct('-') => {
                self.next();
                let n = self.next();
                match &n.tok {
                    Tok::Num(text) => PVal::Num { text: text.clone(), neg: true },
                    other => {
                        return Err(
                            self.err(&n, format!("expected a number after `-`, found {}", describe(other)))
                        );
                    }
                }
            }
            Tok::Num(text) => {
                self.next();
                PVal::Num { text: text.clone(), neg: false }
            }
            Tok::Ident(s) => {
                self.next();
                PVal::Ident(s.clone())
            }
            other => {
                return Err(self.err(&t, format!("expected a parameter value, found {}", describe(other))));
            }
        };
        self.depth -= 1;
        Ok(Spanned { val, line: t.line, col: t.col })
    }

    fn const_value(&mut self, ty: &TensorType) -> Result<Arc<Array>, ParseError> {
        let at = self.peek();
        if self.eat_punct('@') {
            let n = self.next();
            let Tok::Ident(name) = &n.tok else {
                return Err(
                    self.err(&n, format!("expected a constant name after `@`, found {}", describe(&n.tok)))
                );
            };
            let (_, value) = self
                .table
                .iter()
                .find(|(k, _)| k == name)
                .ok_or_else(|| self.err(&at, format!("unknown constant `@{name}`")))?;
            if value.ty() != *ty {
                return Err(self.err(&at, format!("constant `@{name}` has type {}, not {ty}", value.ty())));
            }
            return Ok(value.clone());
        }
        let a = match ty.dtype {
            DType::F32 => self.const_data(ty, |p| p.float::<f32>("f32")),
            DType::F64 => self.const_data(ty, |p| p.float::<f64>("f64")),
            DType::I32 => self.const_data(ty, |p| p.int(|n| i32::try_from(n).ok(), "i32")),
            DType::U32 => self.const_data(ty, |p| p.int(|n| u32::try_from(n).ok(), "u32")),
            DType::Bool => self.const_data(ty, Self::bool_elem),
        }?;
        Ok(Arc::new(a))
    }

    /// A scalar for rank 0, else a bracketed list of exactly as many elements as `ty` has.
    fn const_data<T: Element>(
        &mut self,
        ty: &TensorType,
        elem: impl Fn(&mut Self) -> Result<T, ParseError>,
    ) -> Result<Array, ParseError> {
        let dims = ty.shape.dims();
        if dims.is_empty() && !self.is_punct('[') {
            return Ok(Array::scalar(elem(self)?));
        }
        let open = self.expect_punct('[')?;
        let mut data = Vec::new();
        while !self.is_punct(']') {
            data.push(elem(self)?);
            if !self.eat_punct(',') {
                break;
            }
        }
        self.expect_punct(']')?;
        let n = dims.iter().try_fold(1usize, |a, d| a.checked_mul(*d));
        if n != Some(data.len()) {
            return Err(self.err(&open, format!("{} elements given for type {ty}", data.len())));
        }
        Ok(Array::from_vec(dims, data))
    }

    fn float<T: Float>(&mut self, dt: &str) -> Result<T, ParseError> {
        let neg = self.eat_punct('-');
        let t = self.next();
        let x = match &t.tok {
            Tok::Num(s) => T::dec(s).ok_or_else(|| self.err(&t, format!("malformed number `{s}`")))?,
            Tok::Ident(s) if s == "inf" => T::dec("inf").expect("rust parses inf"),
            Tok::Ident(s) if s == "nan" => T::dec("nan").expect("rust parses nan"),
            Tok::Ident(s) if !neg && *s == format!("{dt}bits") => {
                self.expect_punct('(')?;
                let h = self.next();
                let x = match &h.tok {
                    Tok::Num(s) => s
                        .strip_prefix("0x")
                        .and_then(T::hex_bits)
                        .ok_or_else(|| self.err(&h, format!("malformed bits `{s}`")))?,
                    other => {
                        return Err(self.err(&h, format!("expected hex bits, found {}", describe(other))));
                    }
                };
                self.expect_punct(')')?;
                x
            }
            other => return Err(self.err(&t, format!("expected a {dt} number, found {}", describe(other)))),
        };
        Ok(if neg { -x } else { x })
    }

    fn int<T>(&mut self, conv: fn(i128) -> Option<T>, dt: &str) -> Result<T, ParseError> {
        let neg = self.eat_punct('-');
        let t = self.next();
        match &t.tok {
            Tok::Num(s) => {
                let n: i128 = s.parse().map_err(|_| self.err(&t, format!("malformed integer `{s}`")))?;
                let n = if neg { -n } else { n };
                conv(n).ok_or_else(|| self.err(&t, format!("integer `{n}` out of range for {dt}")))
            }
            other => Err(self.err(&t, format!("expected a {dt} integer, found {}", describe(other)))),
        }
    }

    fn bool_elem(&mut self) -> Result<bool, ParseError> {
        let t = self.next();
        match &t.tok {
            Tok::Ident(s) if s == "true" => Ok(true),
            Tok::Ident(s) if s == "false" => Ok(false),
            other => Err(self.err(&t, format!("expected `true` or `false`, found {}", describe(other)))),
        }
    }
}

/// `f32` and `f64` as the parser reads them.
trait Float: Sized + std::ops::Neg<Output = Self> {
    /// Rust's exact decimal parsing (straight to this type: no double rounding through f64).
    fn dec(s: &str) -> Option<Self>;
    /// The value with these bits, written in hex without `0x`.
    fn hex_bits(s: &str) -> Option<Self>;
}

impl Float for f32 {
    fn dec(s: &str) -> Option<f32> {
        s.parse().ok()
    }
    fn hex_bits(s: &str) -> Option<f32> {
        u32::from_str_radix(s, 16).ok().map(f32::from_bits)
    }
}

impl Float for f64 {
    fn dec(s: &str) -> Option<f64> {
        s.parse().ok()
    }
    fn hex_bits(s: &str) -> Option<f64> {
        u64::from_str_radix(s, 16).ok().map(f64::from_bits)
    }
}

/// Builds the function, giving variables ids in definition order and resolving every use.
fn resolve(
    params: Vec<(NameRef, TensorType)>,
    consts: Vec<(NameRef, TensorType, Arc<Array>)>,
    eqns: Vec<RawEqn>,
    outputs: Vec<NameRef>,
) -> Result<Function, ParseError> {
    let mut f = Function::new();
    let mut ids: HashMap<String, Var> = HashMap::new();
    // A second definition of a name denotes the same variable (with the first type).
    let mut define = |f: &mut Function, n: &NameRef, ty: &TensorType| {
        *ids.entry(n.name.clone()).or_insert_with(|| f.new_var(ty.clone()))
    };
    f.params = params.iter().map(|(n, ty)| define(&mut f, n, ty)).collect();
    f.consts =
        consts.into_iter().map(|(n, ty, value)| ConstDef { var: define(&mut f, &n, &ty), value }).collect();
    let outs: Vec<SmallVec<[Var; 2]>> =
        eqns.iter().map(|e| e.outputs.iter().map(|(n, ty)| define(&mut f, n, ty)).collect()).collect();
    let lookup = |n: &NameRef| {
        ids.get(&n.name)
            .copied()
            .ok_or_else(|| err_at(n.line, n.col, format!("undefined variable `{}`", n.name)))
    };
    for (e, outputs) in eqns.into_iter().zip(outs) {
        let inputs = e.inputs.iter().map(lookup).collect::<Result<_, _>>()?;
        f.eqns.push(Eqn { prim: e.prim, inputs, outputs, loc: e.loc });
    }
    f.outputs = outputs.iter().map(lookup).collect::<Result<_, _>>()?;
    Ok(f)
}
