//! Integration tests of the library: configs as files, the one serve path.
//!
//! One test binary per crate (each binary links the whole dependency tree): the files below
//! are its modules, grouped by concern.

mod config;
mod governance;
mod serve;
mod tls;
