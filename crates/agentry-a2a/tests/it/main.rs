//! Integration tests of the A2A protocol layer.
//!
//! One test binary per crate (each binary links the whole dependency tree): the files
//! below are its modules, grouped by concern.

mod access;
mod bindings;
mod common;
mod envelope;
mod faults;
mod hardening;
mod interop_sdk03;
mod interop_v1;
mod operations;
mod persistence;
mod replicas;
mod server;
mod wire;
