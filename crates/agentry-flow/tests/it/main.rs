//! Integration tests of orchestration.
//!
//! One test binary per crate (each binary links the whole dependency tree): the files
//! below are its modules, grouped by concern.

mod patterns;
mod planner;
mod remote;
mod workflows;
