//! Helpers shared by the sims integration tests.

#![allow(dead_code)]

pub mod brax;
pub mod cli;
