//! The e-graph language: one e-node per kiln equation, with the primitive (and its parameters or
//! sub-functions) interned in a table so that nodes stay small, hashable and ordered.

use egg::{Id, Language};
use kiln_ir::Prim;
use smallvec::SmallVec;
use std::collections::HashMap;

/// Index of an interned [`Prim`] in a [`PrimTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PrimId(pub u32);

/// An e-node of a region.
///
/// * `Input(i)`: the region's `i`-th input (a parameter or a value defined outside the region).
/// * `Const(i)`: entry `i` of the region's constant table (values are known to the analysis).
/// * `Op(p, xs)`: primitive `p` applied to the classes `xs`. A primitive with one result is the value;
///   one with several results (sort, threefry, control flow) is a tuple read through `Proj`.
/// * `Proj(k, [t])`: result `k` of the tuple class `t`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Node {
    /// A region input.
    Input(u32),
    /// A constant from the region's table.
    Const(u32),
    /// A primitive application.
    Op(PrimId, SmallVec<[Id; 3]>),
    /// One result of a multi-result primitive.
    Proj(u32, [Id; 1]),
}

impl Language for Node {
    type Discriminant = (u8, u32);

    fn discriminant(&self) -> Self::Discriminant {
        match self {
            Node::Input(i) => (0, *i),
            Node::Const(i) => (1, *i),
            Node::Op(p, _) => (2, p.0),
            Node::Proj(k, _) => (3, *k),
        }
    }

    fn matches(&self, other: &Self) -> bool {
        self.discriminant() == other.discriminant() && self.children().len() == other.children().len()
    }

    fn children(&self) -> &[Id] {
        match self {
            Node::Input(_) | Node::Const(_) => &[],
            Node::Op(_, xs) => xs,
            Node::Proj(_, x) => x,
        }
    }

    fn children_mut(&mut self) -> &mut [Id] {
        match self {
            Node::Input(_) | Node::Const(_) => &mut [],
            Node::Op(_, xs) => xs,
            Node::Proj(_, x) => x,
        }
    }
}

/// Interned primitives of one region. Primitives without sub-functions are deduplicated (so equal
/// equations hash-cons into one class: CSE); control flow gets a fresh id per occurrence (comparing
/// whole sub-functions is not worth it).
#[derive(Default)]
pub struct PrimTable {
    prims: Vec<Prim>,
    index: HashMap<String, PrimId>,
}

impl PrimTable {
    /// The id of `prim`, interning it if new.
    pub fn intern(&mut self, prim: Prim) -> PrimId {
        let fresh = |prims: &mut Vec<Prim>, prim| {
            prims.push(prim);
            PrimId(u32::try_from(prims.len() - 1).expect("fewer than 2^32 primitives"))
        };
        if !prim.subfunctions().is_empty() {
            return fresh(&mut self.prims, prim);
        }
        let key = format!("{prim:?}");
        if let Some(id) = self.index.get(&key) {
            return *id;
        }
        let id = fresh(&mut self.prims, prim);
        self.index.insert(key, id);
        id
    }

    /// The primitive behind an id.
    pub fn get(&self, id: PrimId) -> &Prim {
        &self.prims[id.0 as usize]
    }
}
