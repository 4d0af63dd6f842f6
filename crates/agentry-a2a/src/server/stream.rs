//! Turning a task's broadcast into answers: a blocking result, or an SSE stream.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};
use serde_json::Value;
use tokio::sync::broadcast::{self, error::RecvError};

use super::hub::{AgentTasks, Events, HubLease, Turn};
use crate::error::RpcError;
use crate::jsonrpc;
use crate::model::*;
use crate::v1;
use crate::version::ProtocolVersion;

/// Waits for the answer to `message/send`: the first event when not blocking, otherwise the
/// end of the turn. A direct message is returned as is; otherwise the task's snapshot.
///
/// The turn's run, when it is the request's to drive, is polled here beside the events: an
/// agent that answers at once is done before its answer is read, on this task. What is left
/// of it when the answer is in continues on its own task ([`super::hub::Run`]).
pub(super) async fn await_result(turn: Turn, blocking: bool) -> SendMessageResult {
    let Turn {
        lease,
        events,
        mut run,
    } = turn;
    let answer = match events {
        Events::Answer(mut rx) => {
            let got = loop {
                match run.as_mut() {
                    Some(r) => tokio::select! {
                        biased;
                        () = r => {
                            // The turn is over: its answer is in, or will not come.
                            run = None;
                        }
                        got = &mut rx => break got,
                    },
                    None => break rx.await,
                }
            };
            match got {
                Ok(StreamEvent::Message(m)) => return SendMessageResult::Message(m),
                // Not blocking: the task as it was announced (submitted).
                Ok(StreamEvent::Task(t)) if !blocking => return SendMessageResult::Task(t),
                _ => None,
            }
        }
        Events::Stream(rx) => follow(rx, &lease, blocking).await,
    };
    if let Some(answer) = answer {
        return answer;
    }
    drop(run);
    // The task taken rather than copied (its history and artifacts, every answered send) when
    // nobody else can reach the hub any more: this lease was the last (so it left the live
    // registry) and the agent's run has returned.
    let hub = lease.hub.clone();
    drop(lease);
    match Arc::try_unwrap(hub) {
        Ok(hub) => SendMessageResult::Task(hub.state.into_inner().task),
        Err(hub) => SendMessageResult::Task(hub.state.lock().await.task.clone()),
    }
}

/// A plain send's answer from a turn's broadcast (a repeat following the first request's
/// turn): a message, or the task announced (not blocking); `None`: the snapshot answers.
async fn follow(
    mut rx: broadcast::Receiver<Arc<StreamEvent>>,
    lease: &HubLease,
    blocking: bool,
) -> Option<SendMessageResult> {
    loop {
        match rx.recv().await {
            Ok(ev) => match &*ev {
                StreamEvent::Message(_) => {
                    // The hub's channel holds the event too: let it go first, and when this
                    // was the last receiver the message moves out instead of being copied.
                    drop(rx);
                    return match Arc::unwrap_or_clone(ev) {
                        StreamEvent::Message(m) => Some(SendMessageResult::Message(m)),
                        _ => unreachable!("matched as a message above"),
                    };
                }
                StreamEvent::Task(t) if !blocking => {
                    return Some(SendMessageResult::Task(t.clone()));
                }
                _ if !blocking => return None,
                e if e.is_final() => return None,
                _ => {}
            },
            Err(RecvError::Lagged(_)) => {
                // Missed events; the snapshot decides.
                let st = lease.hub.state.lock().await;
                if !blocking || st.task.state().ends_turn() {
                    return None;
                }
            }
            Err(RecvError::Closed) => return None,
        }
    }
}

/// How a stream's items are written: JSON-RPC responses carrying the request's id, or bare
/// `StreamResponse` objects (the HTTP+JSON binding), in one protocol version's form.
#[derive(Debug, Clone)]
pub(crate) enum Frame {
    JsonRpc {
        id: Value,
        version: ProtocolVersion,
    },
    Rest(ProtocolVersion),
    /// gRPC messages (`StreamResponse`) in the answer's HTTP/2 body, not SSE.
    #[cfg(feature = "grpc")]
    Grpc,
}

/// One item of a stream as its binding writes it.
enum Item {
    Sse(Event),
    /// A framed gRPC message; `None` when the event could not be written (logged).
    #[cfg(feature = "grpc")]
    Grpc(Option<axum::body::Bytes>),
}

impl Frame {
    fn event(&self, ev: &StreamEvent) -> Item {
        let body = match self {
            #[cfg(feature = "grpc")]
            Frame::Grpc => return Item::Grpc(super::grpc::stream_item(ev)),
            Frame::JsonRpc {
                id,
                version: ProtocolVersion::V0_3,
            } => jsonrpc::encode_result(id, ev),
            Frame::JsonRpc {
                id,
                version: ProtocolVersion::V1_0,
            } => jsonrpc::encode_result(id, &v1::stream_event(ev)),
            Frame::Rest(ProtocolVersion::V1_0) => {
                serde_json::to_vec(&v1::stream_event(ev)).unwrap_or_default()
            }
            Frame::Rest(ProtocolVersion::V0_3) => {
                serde_json::to_vec(&crate::wire::v03::StreamResponse::from(ev)).unwrap_or_default()
            }
        };
        Item::Sse(Event::default().data(String::from_utf8(body).unwrap_or_default()))
    }

    #[cfg(feature = "grpc")]
    fn is_grpc(&self) -> bool {
        matches!(self, Frame::Grpc)
    }

    #[cfg(not(feature = "grpc"))]
    fn is_grpc(&self) -> bool {
        false
    }
}

/// The answer that carries a stream's items: SSE, or a gRPC server stream (`grpc`; HTTP/2
/// keeps that connection alive, so it gets no keep-alive comments).
fn sse<S>(grpc: bool, events: S, keep_alive: Duration) -> Response
where
    S: Stream<Item = Item> + Send + 'static,
{
    #[cfg(feature = "grpc")]
    if grpc {
        return super::grpc::stream_body(events.filter_map(|i| async move {
            match i {
                Item::Grpc(b) => b,
                Item::Sse(_) => None,
            }
        }));
    }
    let _ = grpc;
    let events = events.filter_map(|i| async move {
        match i {
            Item::Sse(e) => Some(Ok::<_, Infallible>(e)),
            #[cfg(feature = "grpc")]
            Item::Grpc(_) => None,
        }
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keep_alive).text("keep-alive"))
        .into_response()
}

/// A streaming request refused before its stream opened, in the form each generation reads.
pub(super) fn error(frame: Frame, e: RpcError) -> Response {
    match frame {
        // v0.3 clients (TCK 0.3 among them) read a refusal from the stream they asked for:
        // one event holding the JSON-RPC error.
        Frame::JsonRpc {
            id,
            version: ProtocolVersion::V0_3,
        } => {
            let body = jsonrpc::encode_error(&id, &e);
            let ev = Event::default().data(String::from_utf8(body).unwrap_or_default());
            sse(
                false,
                stream::iter([Item::Sse(ev)]),
                Duration::from_secs(15),
            )
        }
        // v1.0 tells a refusal from a stream by the content type (TCK 1.0, STREAM-SUB-003):
        // one JSON-RPC error as `application/json`.
        Frame::JsonRpc {
            id,
            version: ProtocolVersion::V1_0,
        } => super::handlers::json_body(jsonrpc::encode_error(&id, &v1::error(&e))),
        // Nothing was streamed yet: a plain HTTP error says it best.
        Frame::Rest(_) => super::rest::error(&e),
        // And a trailers-only status in gRPC.
        #[cfg(feature = "grpc")]
        Frame::Grpc => super::grpc::error(&e),
    }
}

struct Forward {
    /// Counts the stream open in the metrics while it lives.
    _open: super::ops::StreamGuard,
    frame: Frame,
    lease: HubLease,
    rx: broadcast::Receiver<Arc<StreamEvent>>,
    pending: Vec<StreamEvent>,
    done: bool,
}

/// Forwards broadcast events until the final one. A subscriber that lags is sent the current
/// snapshot instead of the events it missed, so it never holds the agent up.
fn forward(f: Forward) -> impl Stream<Item = Item> + Send {
    stream::unfold(f, |mut f| async move {
        if let Some(ev) = f.pending.pop() {
            f.done |= ev.is_final();
            let out = f.frame.event(&ev);
            return Some((out, f));
        }
        if f.done {
            return None;
        }
        match f.rx.recv().await {
            Ok(ev) => {
                f.done = ev.is_final();
                let out = f.frame.event(&ev);
                Some((out, f))
            }
            Err(RecvError::Lagged(n)) => {
                tracing::debug!(task = %f.lease.hub.task_id, skipped = n, "slow subscriber skipped ahead");
                let task = f.lease.hub.state.lock().await.task.clone();
                if task.state().ends_turn() {
                    f.pending.push(StreamEvent::final_status(&task));
                }
                let out = f.frame.event(&StreamEvent::Task(task));
                Some((out, f))
            }
            Err(RecvError::Closed) => None,
        }
    })
}

/// The stream of a `message/stream` turn.
pub(super) fn turn(
    frame: Frame,
    turn: Turn,
    keep_alive: Duration,
    open: super::ops::StreamGuard,
) -> Response {
    if let Some(run) = turn.run {
        run.detach();
    }
    let Events::Stream(rx) = turn.events else {
        // `AgentTasks::start` subscribes a stream's turn to its broadcast.
        return error(
            frame,
            RpcError::internal("the stream's turn has no broadcast to follow"),
        );
    };
    sse(
        frame.is_grpc(),
        forward(Forward {
            _open: open,
            frame,
            lease: turn.lease,
            rx,
            pending: Vec::new(),
            done: false,
        }),
        keep_alive,
    )
}

/// A stream of one event, the task as it stands (final): what a repeated streaming request
/// gets when the first one's turn is over.
pub(super) fn snapshot(frame: Frame, task: Task, keep_alive: Duration) -> Response {
    let events = [StreamEvent::Task(task)].map(|ev| frame.event(&ev));
    sse(frame.is_grpc(), stream::iter(events), keep_alive)
}

/// The stream of `tasks/resubscribe`: the snapshot first, then every change after it. A task
/// already final gets its snapshot and the closing status event.
pub(super) fn resubscribe(
    frame: Frame,
    lease: HubLease,
    task: Task,
    rx: broadcast::Receiver<Arc<StreamEvent>>,
    keep_alive: Duration,
    open: super::ops::StreamGuard,
) -> Response {
    let mut pending = Vec::new();
    if task.state().is_terminal() {
        pending.push(StreamEvent::final_status(&task));
    }
    pending.push(StreamEvent::Task(task));
    sse(
        frame.is_grpc(),
        forward(Forward {
            _open: open,
            frame,
            lease,
            rx,
            pending,
            done: false,
        }),
        keep_alive,
    )
}

/// How often a stream following a task through the shared events checks the store for a turn
/// that ended without its final event reaching it (a replica that died, a lost message).
const FOLLOW_CHECK: Duration = Duration::from_secs(2);

struct Follow {
    _open: super::ops::StreamGuard,
    frame: Frame,
    follow: stream::BoxStream<'static, Vec<u8>>,
    tasks: Arc<AgentTasks>,
    task_id: String,
    /// The status timestamp of the snapshot the stream started from.
    since: Option<String>,
    pending: Vec<StreamEvent>,
    done: bool,
    check: tokio::time::Interval,
}

/// The stream of `tasks/resubscribe` for a task with no turn here, followed through the
/// events shared with the other replicas: the snapshot, then the events any replica
/// publishes, until the final one; a turn that ended without one reaching this stream (its
/// replica died) ends it with the task as stored.
pub(super) fn elsewhere(
    frame: Frame,
    task: Task,
    follow: stream::BoxStream<'static, Vec<u8>>,
    tasks: Arc<AgentTasks>,
    keep_alive: Duration,
    open: super::ops::StreamGuard,
) -> Response {
    let grpc = frame.is_grpc();
    let f = Follow {
        _open: open,
        frame,
        follow,
        tasks,
        task_id: task.id.clone(),
        since: task.status.timestamp.clone(),
        pending: vec![StreamEvent::Task(task)],
        done: false,
        check: tokio::time::interval_at(tokio::time::Instant::now() + FOLLOW_CHECK, FOLLOW_CHECK),
    };
    let events = stream::unfold(f, |mut f| async move {
        if let Some(ev) = f.pending.pop() {
            f.done |= ev.is_final();
            let out = f.frame.event(&ev);
            return Some((out, f));
        }
        if f.done {
            return None;
        }
        loop {
            tokio::select! {
                next = f.follow.next() => {
                    let bytes = next?;
                    if let Some(ev) = super::events::decode(&bytes) {
                        f.done = ev.is_final();
                        let out = f.frame.event(&ev);
                        return Some((out, f));
                    }
                }
                _ = f.check.tick() => {
                    if let Some(task) = f.tasks.turn_ended(&f.task_id, f.since.as_deref()).await {
                        f.done = true;
                        f.pending.push(StreamEvent::final_status(&task));
                        let out = f.frame.event(&StreamEvent::Task(task));
                        return Some((out, f));
                    }
                }
            }
        }
    });
    sse(grpc, events, keep_alive)
}
