//! Folded into `tests/common` (one harness); this re-export keeps the
//! test files that still say `mod harden;` compiling until they switch to
//! `common::...`.
#![allow(unused_imports)]

pub use crate::common::*;
