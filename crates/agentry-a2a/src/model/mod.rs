//! The protocol's data model: one set of types that every wire codec maps to.
//!
//! The field names and shapes follow A2A v0.3.0, whose JSON is the model's own serde form (the
//! v0.3 codec is therefore a plain serde pass). A later codec (v1.0: ProtoJSON enums, unified
//! `Part`) converts to and from these types instead of redefining them.

mod card;
mod message;
mod params;
mod task;

pub use card::*;
pub use message::*;
pub use params::*;
pub use task::*;
