//! The evaluation harness: the domains ported from tau2 checked against tau2 itself, the
//! scorer on hand-checked trajectories, and whole runs over A2A re-scored by tau2's own
//! evaluator.

mod common;
mod e2e;
mod faults;
mod port;
mod scoring;
