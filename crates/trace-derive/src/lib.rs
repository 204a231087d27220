//! `#[derive(Tree)]` for kiln pytrees.
