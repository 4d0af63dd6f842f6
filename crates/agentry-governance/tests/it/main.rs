//! agentry-governance's tests, grouped by concern.

mod audit;
mod token;
