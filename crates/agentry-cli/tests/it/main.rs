//! The `agentry` binary end to end.
//!
//! One test binary per crate (each binary links the whole dependency tree): the files
//! below are its modules, grouped by concern.

mod cli;
mod crash;
mod eval;
mod governance;
mod main_job;
mod operations;
mod replicas;
mod security;
mod support;
mod tracing;
