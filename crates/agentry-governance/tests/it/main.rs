//! agentry-governance's tests, grouped by concern.

mod audit;
mod exchange;
mod token;
