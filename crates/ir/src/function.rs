//! The `Function` graph: typed parameters, constants, equations in SSA order, outputs.

use crate::{Array, DType, Prim, TensorType, TypeError};
use smallvec::SmallVec;
use std::fmt;
use std::sync::Arc;

/// A value in a [`Function`]: an index into its [`Function::vars`] table. Ids are local to one
/// function (sub-functions have their own).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Var(pub u32);

impl Var {
    /// The index into [`Function::vars`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// Where an equation came from in user code (`#[track_caller]` location), for error messages.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SrcLoc {
    /// Source file as `std::panic::Location` gives it.
    pub file: Arc<str>,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl SrcLoc {
    /// The location of the caller of a `#[track_caller]` function.
    pub fn from_location(loc: &std::panic::Location<'_>) -> SrcLoc {
        SrcLoc { file: Arc::from(loc.file()), line: loc.line(), column: loc.column() }
    }
}

impl fmt::Display for SrcLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

impl fmt::Debug for SrcLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// One equation: `outputs = prim(inputs)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Eqn {
    /// The primitive and its parameters (and sub-functions, for control flow).
    pub prim: Prim,
    /// Operands, each defined earlier (a parameter, a constant or an earlier output).
    pub inputs: SmallVec<[Var; 4]>,
    /// Results, each defined here for the first and only time.
    pub outputs: SmallVec<[Var; 2]>,
    /// The user's call site, when known.
    pub loc: Option<SrcLoc>,
}

/// A constant of a [`Function`], bound to a variable. The data is stored out of line and shared.
#[derive(Clone, Debug, PartialEq)]
pub struct ConstDef {
    /// The variable the constant defines.
    pub var: Var,
    /// The value.
    pub value: Arc<Array>,
}

/// A pure, closed array program in SSA form (JAX's "jaxpr").
///
/// Variables are typed `u32` ids indexing [`Function::vars`]; each is defined exactly once, by a
/// parameter, a constant or an equation output, before it is used. Sub-functions (scan bodies, cond
/// branches, ...) live inside the [`Prim`] of the equation that owns them and see only their explicit
/// operands. [`crate::verify`] checks these invariants.
///
/// ```
/// use kiln_ir::{Function, Prim, BinaryOp, TensorType, DType};
/// let mut f = Function::new();
/// let x = f.add_param(TensorType::new(DType::F32, [3]));
/// let y = f.push(Prim::Binary(BinaryOp::Mul), &[x, x], None).unwrap()[0];
/// f.outputs.push(y);
/// assert_eq!(f.var_type(y), &TensorType::new(DType::F32, [3]));
/// ```
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Function {
    /// The type of every variable, indexed by [`Var`].
    pub vars: Vec<TensorType>,
    /// Parameters, in call order.
    pub params: Vec<Var>,
    /// Constants (captured arrays), each bound to a variable.
    pub consts: Vec<ConstDef>,
    /// Equations in SSA order.
    pub eqns: Vec<Eqn>,
    /// Results, in order (a variable may appear several times, or be a parameter).
    pub outputs: Vec<Var>,
}

impl Function {
    /// An empty function.
    pub fn new() -> Function {
        Function::default()
    }

    /// Allocates a fresh variable of type `ty` (defined by nothing yet).
    pub fn new_var(&mut self, ty: TensorType) -> Var {
        let v = Var(u32::try_from(self.vars.len()).expect("more than 2^32 variables"));
        self.vars.push(ty);
        v
    }

    /// Adds a parameter of type `ty`.
    pub fn add_param(&mut self, ty: TensorType) -> Var {
        let v = self.new_var(ty);
        self.params.push(v);
        v
    }

    /// Adds a constant holding `value`.
    pub fn add_const(&mut self, value: impl Into<Arc<Array>>) -> Var {
        let value = value.into();
        let v = self.new_var(value.ty());
        self.consts.push(ConstDef { var: v, value });
        v
    }

    /// Appends `prim(inputs)`, typing its outputs with the shape rule; returns the new output variables.
    ///
    /// # Errors
    /// The shape rule's [`TypeError`] when the operands do not fit the primitive.
    pub fn push(
        &mut self,
        prim: Prim,
        inputs: &[Var],
        loc: Option<SrcLoc>,
    ) -> Result<SmallVec<[Var; 2]>, TypeError> {
        let in_types: Vec<TensorType> = inputs.iter().map(|v| self.var_type(*v).clone()).collect();
        let out_types = crate::shape_rule::output_types(&prim, &in_types)?;
        let outputs: SmallVec<[Var; 2]> = out_types.into_iter().map(|t| self.new_var(t)).collect();
        self.eqns.push(Eqn { prim, inputs: SmallVec::from_slice(inputs), outputs: outputs.clone(), loc });
        Ok(outputs)
    }

    /// The type of a variable.
    ///
    /// # Panics
    /// If `v` is not a variable of this function.
    pub fn var_type(&self, v: Var) -> &TensorType {
        &self.vars[v.index()]
    }

    /// The parameter types, in order.
    pub fn param_types(&self) -> Vec<TensorType> {
        self.params.iter().map(|v| self.var_type(*v).clone()).collect()
    }

    /// The output types, in order.
    pub fn output_types(&self) -> Vec<TensorType> {
        self.outputs.iter().map(|v| self.var_type(*v).clone()).collect()
    }

    /// The dtype of a variable.
    pub fn dtype(&self, v: Var) -> DType {
        self.var_type(v).dtype
    }
}
