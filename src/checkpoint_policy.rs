//! The checkpoint policy of reverse-mode `scan` (DESIGN §5): how much a `grad` through a long
//! `scan` stores between its forward and backward passes.
//!
//! By default ([`Checkpoint::Auto`]) a `T`-step scan stores every step's residuals when they fit in
//! [`AUTO_STORE_ALL_BYTES`] (as JAX does), and otherwise saves its carry every ⌈√T⌉ steps and
//! recomputes the steps between ([`Checkpoint::Sqrt`]), so the memory kept grows like √T·state
//! instead of T·residuals;
//! [`with_checkpoint`] chooses another policy for the transforms run inside it:
//!
//! ```
//! use kiln::prelude::*;
//! use kiln::{Checkpoint, with_checkpoint};
//! let f = |x: Tensor| scan(|c: Tensor, x: Tensor| (&c * &x, ()), Tensor::scalar(1.0f64), x).0;
//! let xs = Tensor::from_vec(&[3], vec![2.0f64, 3.0, 4.0]);
//! // d(x0·x1·x2)/dx = [x1·x2, x0·x2, x0·x1] = [12, 8, 6], whatever the policy.
//! for policy in [Checkpoint::Auto, Checkpoint::Sqrt, Checkpoint::Every(2), Checkpoint::StoreAll] {
//!     let g = with_checkpoint(policy, || grad(f)(xs.clone()));
//!     assert_eq!(g.to_vec::<f64>(), vec![12.0, 8.0, 6.0]);
//! }
//! ```

pub use kiln_transform::ad::{AUTO_STORE_ALL_BYTES, Checkpoint, checkpoint_policy, with_checkpoint};
