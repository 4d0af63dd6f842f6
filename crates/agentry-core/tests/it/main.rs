//! Integration tests of the agent core.
//!
//! One test binary per crate (each binary links the whole dependency tree): the files
//! below are its modules, grouped by concern.

mod agents;
mod model_faults;
mod openai_e2e;
mod openai_wire;
mod react_loop;
