//! agentry-nats against a real NATS server: 127.0.0.1:4222 (or `$AGENTRY_TEST_NATS`), with
//! JetStream. The test command requires it (`AGENTRY_REQUIRE_NATS=1`); elsewhere these tests
//! record a skip.

mod bus;
mod events;
mod restart;

fn url() -> String {
    std::env::var("AGENTRY_TEST_NATS").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}
