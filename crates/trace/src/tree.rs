//! Pytrees: values made of tensors (tuples, `Vec`, arrays, `Option`, user structs with
//! `#[derive(Tree)]`) that transforms flatten to a list of leaves and rebuild.

use crate::Tensor;

/// A value whose tensors can be listed in a fixed order and put back (JAX's pytree).
///
/// `unflatten` uses `self` as the template of the structure, so non-tensor parts (a `Vec`'s length, an
/// `Option`'s presence, `#[tree(skip)]` fields of a derived struct) come from the template.
///
/// Derive it for a struct of tensors:
/// ```
/// use kiln_trace::{Tensor, Tree};
/// #[derive(Tree, Clone)]
/// struct State {
///     q: Tensor,
///     qd: Tensor,
///     #[tree(skip)]
///     name: String,
/// }
/// let s = State { q: Tensor::scalar(1.0f32), qd: Tensor::scalar(2.0f32), name: "pendulum".into() };
/// assert_eq!(s.leaves().len(), 2);
/// let doubled = s.map(|t| t * 2.0);
/// assert_eq!(doubled.qd.item::<f32>(), 4.0);
/// assert_eq!(doubled.name, "pendulum");
/// ```
pub trait Tree: Sized {
    /// Appends this value's tensors to `out`, in a fixed order.
    fn flatten_into(&self, out: &mut Vec<Tensor>);

    /// Builds a value shaped like `self`, taking its tensors from `leaves` in the order of
    /// [`Tree::flatten_into`].
    ///
    /// # Panics
    /// If `leaves` runs out (a kiln bug: callers pass exactly as many leaves as were flattened).
    fn unflatten_from(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self;

    /// Appends a description of the structure (not the values), e.g. `(T, [T; 2])`; equal descriptions
    /// mean the same tree structure.
    fn describe(&self, out: &mut String);

    /// The tensors of this value, in order.
    fn leaves(&self) -> Vec<Tensor> {
        let mut v = Vec::new();
        self.flatten_into(&mut v);
        v
    }

    /// A value shaped like `self` made of `leaves`.
    ///
    /// # Panics
    /// If the number of leaves differs from `self.leaves().len()`.
    fn rebuild(&self, leaves: Vec<Tensor>) -> Self {
        let n = leaves.len();
        let mut it = leaves.into_iter();
        let out = self.unflatten_from(&mut it);
        assert!(it.next().is_none(), "kiln: {n} leaves given for a tree with fewer");
        out
    }

    /// Applies `f` to every tensor (`jax.tree.map`).
    fn map(&self, mut f: impl FnMut(&Tensor) -> Tensor) -> Self {
        let leaves = self.leaves().iter().map(&mut f).collect();
        self.rebuild(leaves)
    }

    /// The structure description as a string.
    fn structure(&self) -> String {
        let mut s = String::new();
        self.describe(&mut s);
        s
    }
}

/// Takes the next leaf; a missing leaf is a kiln bug.
pub fn next_leaf(leaves: &mut dyn Iterator<Item = Tensor>) -> Tensor {
    leaves.next().expect("kiln: too few leaves to rebuild a tree")
}

impl Tree for Tensor {
    fn flatten_into(&self, out: &mut Vec<Tensor>) {
        out.push(self.clone());
    }
    fn unflatten_from(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self {
        next_leaf(leaves)
    }
    fn describe(&self, out: &mut String) {
        out.push('T');
    }
}

impl Tree for () {
    fn flatten_into(&self, _: &mut Vec<Tensor>) {}
    fn unflatten_from(&self, _: &mut dyn Iterator<Item = Tensor>) -> Self {}
    fn describe(&self, out: &mut String) {
        out.push_str("()");
    }
}

impl<T: Tree> Tree for Vec<T> {
    fn flatten_into(&self, out: &mut Vec<Tensor>) {
        self.iter().for_each(|x| x.flatten_into(out));
    }
    fn unflatten_from(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self {
        self.iter().map(|x| x.unflatten_from(leaves)).collect()
    }
    fn describe(&self, out: &mut String) {
        out.push('[');
        for (i, x) in self.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            x.describe(out);
        }
        out.push(']');
    }
}

impl<T: Tree, const N: usize> Tree for [T; N] {
    fn flatten_into(&self, out: &mut Vec<Tensor>) {
        self.iter().for_each(|x| x.flatten_into(out));
    }
    fn unflatten_from(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self {
        std::array::from_fn(|i| self[i].unflatten_from(leaves))
    }
    fn describe(&self, out: &mut String) {
        out.push('[');
        for (i, x) in self.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            x.describe(out);
        }
        out.push(']');
    }
}

impl<T: Tree> Tree for Option<T> {
    fn flatten_into(&self, out: &mut Vec<Tensor>) {
        if let Some(x) = self {
            x.flatten_into(out);
        }
    }
    fn unflatten_from(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self {
        self.as_ref().map(|x| x.unflatten_from(leaves))
    }
    fn describe(&self, out: &mut String) {
        match self {
            Some(x) => {
                out.push_str("Some(");
                x.describe(out);
                out.push(')');
            }
            None => out.push_str("None"),
        }
    }
}

impl<T: Tree> Tree for Box<T> {
    fn flatten_into(&self, out: &mut Vec<Tensor>) {
        (**self).flatten_into(out);
    }
    fn unflatten_from(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self {
        Box::new((**self).unflatten_from(leaves))
    }
    fn describe(&self, out: &mut String) {
        (**self).describe(out);
    }
}

macro_rules! tuple_tree {
    ($($name:ident $idx:tt),+) => {
        impl<$($name: Tree),+> Tree for ($($name,)+) {
            fn flatten_into(&self, out: &mut Vec<Tensor>) {
                $(self.$idx.flatten_into(out);)+
            }
            fn unflatten_from(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self {
                ($(self.$idx.unflatten_from(leaves),)+)
            }
            fn describe(&self, out: &mut String) {
                out.push('(');
                $(
                    if $idx > 0 {
                        out.push_str(", ");
                    }
                    self.$idx.describe(out);
                )+
                out.push(')');
            }
        }
    };
}

tuple_tree!(A 0);
tuple_tree!(A 0, B 1);
tuple_tree!(A 0, B 1, C 2);
tuple_tree!(A 0, B 1, C 2, D 3);
tuple_tree!(A 0, B 1, C 2, D 3, E 4);
tuple_tree!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_tree!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_tree!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
