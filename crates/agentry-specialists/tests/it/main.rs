//! Integration tests of the specialists and the main job's parts.
//!
//! One test binary per crate (each binary links the whole dependency tree): the files
//! below are its modules, grouped by concern.

mod deck;
mod formats;
mod kinds;
mod pptx;
mod rag;
mod researcher;
