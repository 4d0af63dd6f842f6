//! Live tasks: one [`Hub`] per task that is running or watched.
//!
//! A hub holds the task's current snapshot behind an async lock. Every change (an agent event,
//! a cancel) happens under that lock in one order: apply to the snapshot (state changes through
//! [`Task::transition`]), save to the store, then publish: to the plain send waiting for its
//! answer (one event, handed over), and on a bounded broadcast channel made when the first
//! stream or repeat subscribes. A subscriber takes the lock to read the snapshot and subscribe
//! in one step, so it sees every change after its snapshot, and a subscriber racing
//! completion sees the terminal snapshot. A subscriber that falls behind the channel's buffer
//! is not waited for: it skips ahead and is sent the current snapshot instead (see
//! `server::stream`).
//!
//! A plain send drives its turn's agent itself while it waits ([`Run`]): an agent that
//! answers at once costs no task of its own and no wake-up across tasks.
//!
//! Hubs live in a registry only while a turn runs or someone subscribes; finished tasks are
//! only in the store, so memory stays flat however many tasks have run.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{FutureExt, StreamExt};
use tokio::sync::{Mutex as AsyncMutex, Notify, broadcast, oneshot, watch};
use tracing::Instrument;

use super::executor::{DynAgentExecutor, EventSink, ExecutorError, RequestContext};
use super::handlers::Admitted;
use super::push::PushSender;
use super::queue::{Claimed, Job, Queueing};
use crate::error::RpcError;
use crate::model::*;
use crate::store::{KeyClaim, OutgoingPush, TaskStore};

/// What an agent emits.
pub(crate) enum AgentEvent {
    Status(TaskStatus),
    /// `working`, ending the turn: the agent waits for the next message unasked.
    Park(TaskStatus),
    Artifact {
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    },
    Message(Message),
}

pub(crate) struct HubState {
    pub task: Task,
    /// The task exists in the store (false for a new task until its first event).
    stored: bool,
    /// The current turn has published its opening Task snapshot.
    announced: bool,
    /// The current turn has ended (final status or a direct message).
    turn_over: bool,
    running: bool,
    /// When the snapshot was last handed to the store.
    last_saved: Option<Instant>,
    pub push: Vec<PushNotificationConfig>,
    /// Why the store last refused a save that had to succeed (the end of a turn).
    store_error: Option<String>,
    /// Every event, to streams and repeats following the task: made when the first of them
    /// subscribes (a plain send is answered through its [`Waiter`] and never needs it).
    events: Option<broadcast::Sender<Arc<StreamEvent>>>,
    /// The plain send that started the turn, waiting for the one event that answers it.
    waiter: Option<Waiter>,
}

/// A plain send waiting for its answer: a message, the end of the turn (blocking), or the
/// first event (not blocking). One event, handed over, never copied or broadcast.
struct Waiter {
    blocking: bool,
    tx: oneshot::Sender<StreamEvent>,
}

impl Waiter {
    fn wants(&self, ev: &StreamEvent) -> bool {
        matches!(ev, StreamEvent::Message(_)) || !self.blocking || ev.is_final()
    }
}

impl HubState {
    /// A turn starts: a parked task runs again (saved so with the turn's first snapshot),
    /// `queued` when a worker took it from the work queue ([`Task::queued`]).
    fn begin_turn(&mut self, queued: bool) {
        self.task.parked = false;
        self.task.queued = queued;
        self.running = true;
        self.announced = false;
        self.last_saved = None;
        self.turn_over = false;
    }

    /// A receiver of every event from now on, the channel made on first use.
    fn subscribe(&mut self, capacity: usize) -> broadcast::Receiver<Arc<StreamEvent>> {
        match &self.events {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = broadcast::channel(capacity);
                self.events = Some(tx);
                rx
            }
        }
    }
}

/// How long a message waits for the previous turn's agent to return after its final event.
const TURN_END_WAIT: Duration = Duration::from_secs(5);

/// The most a running turn's progress goes unsaved, while few tasks are live (see
/// [`AgentTasks::persist_interval`]).
const PERSIST_INTERVAL: Duration = Duration::from_millis(100);

/// The live-task registry's hash: task ids are made by the server (UUIDs), never chosen by a
/// client (a message naming a task that does not exist is refused before anything is
/// registered), so a fixed key is safe against chosen collisions and costs a fraction of
/// SipHash's work.
type HubHash = foldhash::fast::FixedState;

/// Live tasks of an agent beyond which their progress is saved less often, in proportion:
/// at most `PERSIST_TURNS / PERSIST_INTERVAL` (5,000) saves of progress a second per agent
/// and process, however many turns stream at once.
const PERSIST_TURNS: usize = 500;

/// One live task.
pub(crate) struct Hub {
    pub task_id: String,
    pub context_id: String,
    /// The task's owner ([`Task::owner`]); only that caller reaches the hub.
    owner: Option<String>,
    pub state: AsyncMutex<HubState>,
    cancel: watch::Sender<bool>,
    /// Signalled when a turn's agent has returned (`running` went false).
    ended: Notify,
    /// Leases held on this hub: registered in [`AgentTasks`] while any is.
    leases: AtomicUsize,
    /// Whether it was ever registered. A new task's hub is registered once announced (or at
    /// once when an idempotency key names it): before, nobody can know its id, and a turn
    /// answered with a direct message never is.
    registered: AtomicBool,
    agent: Arc<AgentTasks>,
}

impl Hub {
    fn new(
        task: Task,
        stored: bool,
        push: Vec<PushNotificationConfig>,
        agent: Arc<AgentTasks>,
    ) -> Self {
        let (cancel, _) = watch::channel(false);
        Hub {
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            owner: task.owner.clone(),
            state: AsyncMutex::new(HubState {
                task,
                stored,
                announced: false,
                turn_over: false,
                running: false,
                last_saved: None,
                push,
                store_error: None,
                events: None,
                waiter: None,
            }),
            cancel,
            ended: Notify::new(),
            leases: AtomicUsize::new(0),
            registered: AtomicBool::new(false),
            agent,
        }
    }

    /// Hands an event to whoever follows the task: other replicas, streams here, and the
    /// send waiting for it. Called under the state's lock, so a subscriber sees every event
    /// after its snapshot.
    fn publish(&self, st: &mut HubState, ev: StreamEvent) {
        // Replicas following the task (a subscription that reached another one).
        if let Some(bus) = &self.agent.events {
            bus.publish(&self.agent.agent, &self.task_id, super::events::encode(&ev));
        }
        let streams = st.events.as_ref().filter(|tx| tx.receiver_count() > 0);
        match st.waiter.take_if(|w| w.wants(&ev)) {
            Some(w) => {
                if let Some(tx) = streams {
                    let _ = tx.send(Arc::new(ev.clone()));
                }
                // A waiter gone (its client left) is fine: the turn goes on.
                let _ = w.tx.send(ev);
            }
            None => {
                // No receivers is fine: nobody is watching.
                if let Some(tx) = streams {
                    let _ = tx.send(Arc::new(ev));
                }
            }
        }
    }

    /// Whether anyone would receive the task's snapshot published now: worth copying the
    /// task for only then.
    fn snapshot_wanted(&self, st: &HubState) -> bool {
        self.agent.events.is_some()
            || st.events.as_ref().is_some_and(|tx| tx.receiver_count() > 0)
            || st.waiter.as_ref().is_some_and(|w| !w.blocking)
    }

    /// Whether anyone would receive a status or artifact update published now (`is_final`:
    /// it ends the turn): worth building only then. A plain blocking send waits for the final
    /// one alone, and the others' ids and status copies were a dozen allocations a task.
    fn update_wanted(&self, st: &HubState, is_final: bool) -> bool {
        self.agent.events.is_some()
            || st.events.as_ref().is_some_and(|tx| tx.receiver_count() > 0)
            || st.waiter.as_ref().is_some_and(|w| !w.blocking || is_final)
    }

    /// Publishes the task's snapshot, when anyone would receive it.
    fn publish_snapshot(&self, st: &mut HubState) {
        if self.snapshot_wanted(st) {
            let ev = StreamEvent::Task(st.task.clone());
            self.publish(st, ev);
        }
    }

    /// Saves the snapshot. The end of a turn is saved and waited for: a client is answered
    /// then, and the hub may be dropped after it. Within a turn, the first save is queued at
    /// once and later ones at most every [`PERSIST_INTERVAL`] (longer when many tasks are
    /// live: [`AgentTasks::persist_interval`]; the next save carries whatever was skipped), so a fast agent costs one or two writes per turn while a long one is
    /// still checkpointed as it goes. Reads of a live task come from the hub, not the store.
    ///
    /// `pushes` (this change's notifications) are stored with the snapshot, in the same
    /// transaction, or alone when the snapshot's save is skipped.
    async fn save(
        &self,
        st: &mut HubState,
        ends_turn: bool,
        pushes: &[OutgoingPush],
    ) -> Result<(), ExecutorError> {
        let store = &self.agent.store;
        if ends_turn || st.task.state().ends_turn() {
            st.last_saved = Some(Instant::now());
            return match store.save_with_pushes(&st.task, pushes).await {
                Ok(()) => Ok(()),
                Err(e) => {
                    let why = format!("cannot store task: {e}");
                    st.store_error = Some(why.clone());
                    Err(ExecutorError::Failed(why))
                }
            };
        }
        // The stretched interval (a lock on the agent's live tasks) is asked only once the
        // shortest has passed, not on every event of a turn.
        if st.last_saved.is_none_or(|t| {
            t.elapsed() >= PERSIST_INTERVAL && t.elapsed() >= self.agent.persist_interval()
        }) {
            st.last_saved = Some(Instant::now());
            drop(store.save_with_pushes(&st.task, pushes));
        } else if !pushes.is_empty() {
            drop(store.enqueue_pushes(pushes));
        }
        Ok(())
    }

    /// The notifications the task's current state owes its webhooks.
    fn pushes(&self, st: &HubState) -> Vec<OutgoingPush> {
        self.agent.outgoing(&st.push, &st.task)
    }

    /// Saves the snapshot now with the notifications it owes, and waits: a change a request
    /// is answered with (a cancel, a queued task). Returns the notifications, to be sent.
    async fn save_now(&self, st: &HubState) -> Result<Vec<OutgoingPush>, RpcError> {
        let pushes = self.pushes(st);
        self.agent
            .store
            .save_with_pushes(&st.task, &pushes)
            .await
            .map_err(|e| RpcError::internal(e.to_string()))?;
        Ok(pushes)
    }

    /// Hands notifications already stored (see [`Hub::save`]) to the sender.
    fn send_pushes(&self, pushes: Vec<OutgoingPush>) {
        if let Some(p) = &self.agent.push
            && !pushes.is_empty()
        {
            let _ = p.queue(pushes, Some(&self.agent.store));
        }
    }

    /// Persists and publishes the opening snapshot of a turn, once.
    async fn announce(self: &Arc<Self>, st: &mut HubState) -> Result<(), ExecutorError> {
        if !st.announced {
            st.task.stamp();
            self.agent.register(self);
            let pushes = self.pushes(st);
            self.save(st, false, &pushes).await?;
            st.stored = true;
            st.announced = true;
            self.publish_snapshot(st);
            self.send_pushes(pushes);
        }
        Ok(())
    }

    /// Applies one agent event: snapshot, store, publish, push.
    pub(crate) async fn apply(self: &Arc<Self>, ev: AgentEvent) -> Result<(), ExecutorError> {
        let parks = matches!(ev, AgentEvent::Park(_));
        let mut st = self.state.lock().await;
        if st.task.state().is_terminal() || st.turn_over {
            return Err(ExecutorError::TaskClosed(self.task_id.clone()));
        }
        match ev {
            AgentEvent::Message(mut m) if !st.stored => {
                // A direct answer: no task is created, so the message names none.
                m.task_id = None;
                st.turn_over = true;
                self.publish(&mut st, StreamEvent::Message(m));
            }
            AgentEvent::Message(m) => {
                self.announce(&mut st).await?;
                st.task.history.push(m.clone());
                self.save(&mut st, true, &[]).await?;
                st.turn_over = true;
                self.publish(&mut st, StreamEvent::Message(m));
            }
            AgentEvent::Status(status) | AgentEvent::Park(status) => {
                self.announce(&mut st).await?;
                st.task.transition(status)?;
                st.task.parked = parks;
                let pushes = self.pushes(&st);
                self.save(&mut st, parks, &pushes).await?;
                let is_final = st.task.state().ends_turn() || parks;
                st.turn_over = is_final;
                if self.update_wanted(&st, is_final) {
                    let ev = StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
                        task_id: self.task_id.clone(),
                        context_id: self.context_id.clone(),
                        status: st.task.status.clone(),
                        is_final,
                        metadata: None,
                    });
                    self.publish(&mut st, ev);
                }
                self.send_pushes(pushes);
            }
            AgentEvent::Artifact {
                artifact,
                append,
                last_chunk,
            } => {
                self.announce(&mut st).await?;
                st.task.apply_artifact(&artifact, append);
                self.save(&mut st, false, &[]).await?;
                if self.update_wanted(&st, false) {
                    self.publish(
                        &mut st,
                        StreamEvent::ArtifactUpdate(TaskArtifactUpdateEvent {
                            task_id: self.task_id.clone(),
                            context_id: self.context_id.clone(),
                            artifact,
                            append: append.then_some(true),
                            last_chunk: last_chunk.then_some(true),
                            metadata: None,
                        }),
                    );
                }
            }
        }
        Ok(())
    }

    /// Closes a turn whose agent returned: `Ok` without a final state completes the task, an
    /// error fails it with the error's text.
    async fn end_turn(self: &Arc<Self>, result: Result<(), ExecutorError>) {
        self.close_turn(result).await;
        let mut st = self.state.lock().await;
        self.force_end(&mut st).await;
        // Only now may the next turn start: a client that answered the moment the final
        // event reached it waits in `start` for this, instead of being refused.
        st.running = false;
        drop(st);
        self.ended.notify_waiters();
    }

    async fn close_turn(self: &Arc<Self>, result: Result<(), ExecutorError>) {
        let open = {
            let st = self.state.lock().await;
            !(st.turn_over || st.task.state().is_terminal())
        };
        if !open {
            return;
        }
        let status = match result {
            Ok(()) => TaskStatus::now(TaskState::Completed, None),
            Err(ExecutorError::TaskClosed(_)) => return,
            Err(ExecutorError::Rejected(why)) => {
                TaskStatus::now(TaskState::Rejected, Some(self.agent_text(why)))
            }
            Err(e) => TaskStatus::now(TaskState::Failed, Some(self.agent_text(e.to_string()))),
        };
        if let Err(e) = self.apply(AgentEvent::Status(status)).await {
            tracing::warn!(task = %self.task_id, "closing the turn failed: {e}");
        }
    }

    /// A turn still open after its agent returned and the turn was closed: the store refused
    /// its end (disk full, a lost database). The caller still gets an end: the task failed,
    /// saying why (saved if the store takes it now), so nobody waits forever.
    async fn force_end(self: &Arc<Self>, st: &mut HubState) {
        if st.turn_over {
            return;
        }
        let why = st
            .store_error
            .take()
            .unwrap_or_else(|| "the task store refused the update".into());
        let said = self.agent_text(format!("The task could not be stored, so it failed: {why}"));
        st.task.history.push(said.clone());
        st.task.status = TaskStatus::now(TaskState::Failed, Some(said));
        let pushes = self.pushes(st);
        if let Err(e) = self.agent.store.save_with_pushes(&st.task, &pushes).await {
            tracing::warn!(task = %self.task_id, "the failed task could not be stored either: {e}");
        }
        st.turn_over = true;
        if !st.announced {
            self.agent.register(self);
            st.announced = true;
            self.publish_snapshot(st);
        }
        let ev = StreamEvent::final_status(&st.task);
        self.publish(st, ev);
        self.send_pushes(pushes);
    }

    fn agent_text(&self, text: String) -> Message {
        Message::text(Role::Agent, text).in_task(&self.task_id, &self.context_id)
    }
}

/// Keeps a hub registered while a stream holds it; releases it on drop.
pub(crate) struct HubLease {
    pub hub: Arc<Hub>,
}

impl HubLease {
    /// Another lease on the same hub, without the registry's lock: this one keeps the hub
    /// registered, so only the count changes.
    fn another(&self) -> HubLease {
        self.hub.leases.fetch_add(1, Ordering::Relaxed);
        HubLease {
            hub: self.hub.clone(),
        }
    }
}

impl Drop for HubLease {
    fn drop(&mut self) {
        self.hub.agent.release(&self.hub);
    }
}

/// The live tasks of one agent, and what they need: store, executor, push sender.
pub(crate) struct AgentTasks {
    pub store: Arc<dyn TaskStore>,
    pub executor: Arc<dyn DynAgentExecutor>,
    pub push: Option<PushSender>,
    pub stream_buffer: usize,
    hubs: Mutex<HashMap<String, Arc<Hub>, HubHash>>,
    /// The agent's name, for its spans.
    agent: String,
    /// How long an idempotency key holds its first request's task.
    idempotency_window: Duration,
    /// Task events shared with the agent's other replicas.
    events: Option<Arc<dyn super::TaskEvents>>,
    /// Where new tasks sent without waiting are queued for workers.
    queue: Option<Queueing>,
    /// The agent's counters (takeovers, queued and worked turns).
    metrics: Arc<super::ops::AgentMetrics>,
    /// Whether the request body limit keeps a new task under [`MAX_TASK_BYTES`] by itself
    /// (see [`fits_by_body_limit`]): then a new task's size is not counted.
    new_tasks_fit: bool,
}

/// What an agent's tasks share with its other replicas (task events, a queue of turns) and
/// with the rest of the server (its counters).
pub(crate) struct Shared {
    pub events: Option<Arc<dyn super::TaskEvents>>,
    pub queue: Option<Queueing>,
    pub metrics: Arc<super::ops::AgentMetrics>,
    /// The server's request body limit, which bounds a new task's size.
    pub body_limit: usize,
}

/// What a subscription follows: a turn running here, or one running on another replica
/// (its events through [`super::TaskEvents`]).
pub(crate) enum Subscription {
    Here(HubLease, Task, broadcast::Receiver<Arc<StreamEvent>>),
    Elsewhere(Task, futures_util::stream::BoxStream<'static, Vec<u8>>),
}

/// What a send starts: a new turn, or, for a repeat of an earlier request (same idempotency
/// key, same request), that request's task.
pub(crate) enum Started {
    Turn(Turn),
    Again(HubLease),
}

/// How long a repeated request waits for the task its key names to appear, before taking the
/// key as left behind by a server that died between claiming it and saving the task.
const CLAIM_SETTLE: Duration = Duration::from_secs(2);

/// The same wait, on a store that forgets finished tasks ([`TaskStore::forgets_finished`]):
/// its claims and tasks live and die with this process, so only the first case is possible.
const FORGOTTEN_SETTLE: Duration = Duration::from_millis(250);

/// A started turn: the hub, a receiver subscribed before the agent ran, a lease, and the
/// agent's run when the request is to drive it (see [`Run`]).
pub(crate) struct Turn {
    pub lease: HubLease,
    pub events: Events,
    pub run: Option<Run>,
}

/// What a request follows a turn by.
pub(crate) enum Events {
    /// Every event (a stream; a repeat following the first request's turn).
    Stream(broadcast::Receiver<Arc<StreamEvent>>),
    /// The one event that answers a plain send (see [`Waiter`]); closed without one when the
    /// turn ended some other way (the snapshot answers then).
    Answer(oneshot::Receiver<StreamEvent>),
}

/// An agent's run for one turn, not yet on a task of its own. The request that started it
/// may drive it while it waits for its answer (a message answered at once then takes no
/// spawned task, no wake-up across tasks); whatever is left of it when it is dropped
/// unfinished (the answer came first, the client went away) continues on its own task, so a
/// turn always runs to its end.
pub(crate) struct Run(Option<crate::store::BoxFuture<'static, ()>>);

impl Run {
    /// Goes on on a task of its own.
    pub(crate) fn detach(self) {
        drop(self);
    }
}

impl std::future::Future for Run {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        let Some(fut) = self.0.as_mut() else {
            return std::task::Poll::Ready(());
        };
        let done = fut.as_mut().poll(cx);
        if done.is_ready() {
            self.0 = None;
        }
        done
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(fut) = self.0.take() {
            // Outside a runtime (it is shutting down) there is nothing left to run it on.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(fut);
            }
        }
    }
}

impl AgentTasks {
    pub(super) fn new(
        agent: String,
        store: Arc<dyn TaskStore>,
        executor: Arc<dyn DynAgentExecutor>,
        push: Option<PushSender>,
        stream_buffer: usize,
        idempotency_window: Duration,
        shared: Shared,
    ) -> Arc<Self> {
        let tasks = Arc::new(AgentTasks {
            agent,
            store,
            executor,
            push,
            stream_buffer: stream_buffer.max(1),
            hubs: Mutex::new(HashMap::default()),
            idempotency_window,
            events: shared.events,
            queue: shared.queue,
            metrics: shared.metrics,
            new_tasks_fit: fits_by_body_limit(shared.body_limit),
        });
        // A store shared by replicas: tasks a dead replica was running are taken over
        // without waiting for someone to ask.
        if let (Some(every), Ok(rt)) = (
            tasks.store.sweep_every(),
            tokio::runtime::Handle::try_current(),
        ) {
            rt.spawn(sweep(Arc::downgrade(&tasks), every));
        }
        // Events shared with replicas: this one cancels the turns it runs when another asks.
        if let (Some(bus), Ok(rt)) = (tasks.events.clone(), tokio::runtime::Handle::try_current()) {
            rt.spawn(cancels(
                Arc::downgrade(&tasks),
                bus.clone(),
                tasks.agent.clone(),
            ));
            rt.spawn(push_reloads(
                Arc::downgrade(&tasks),
                bus,
                tasks.agent.clone(),
            ));
        }
        // A worker: turns queued by any replica are pulled and run here.
        if let (Some(q), Ok(rt)) = (
            tasks.queue.clone().filter(|q| q.workers > 0),
            tokio::runtime::Handle::try_current(),
        ) {
            rt.spawn(work(Arc::downgrade(&tasks), q, tasks.agent.clone()));
        }
        tasks
    }

    /// The notifications `task`'s state owes the webhooks of `configs` (none without a
    /// sender: push is off for this agent).
    fn outgoing(&self, configs: &[PushNotificationConfig], task: &Task) -> Vec<OutgoingPush> {
        match &self.push {
            Some(_) if !configs.is_empty() => PushSender::outgoing(configs, task),
            _ => Vec::new(),
        }
    }

    /// How often a running turn's progress is saved: every [`PERSIST_INTERVAL`], stretched in
    /// proportion once more than [`PERSIST_TURNS`] tasks are live. Each save writes the whole
    /// task: 10,000 turns streaming at once, each saved every 100 ms, queued more saves than
    /// PostgreSQL took in (2.2 GB of pending writes across three replicas); the end of a turn
    /// is always saved.
    fn persist_interval(&self) -> Duration {
        let live = self.hubs().len() / PERSIST_TURNS;
        PERSIST_INTERVAL * u32::try_from(live).unwrap_or(u32::MAX).max(1)
    }

    fn hubs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Hub>, HubHash>> {
        self.hubs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `hub` (or the one already registered for its task) and takes a lease on it.
    fn lease(self: &Arc<Self>, hub: Arc<Hub>) -> HubLease {
        let mut hubs = self.hubs();
        let hub = hubs.entry(hub.task_id.clone()).or_insert(hub).clone();
        hub.registered.store(true, Ordering::Release);
        // Counted under the lock: a release that took the count to zero re-checks it under
        // the same lock before unregistering, so a hub found here stays registered.
        hub.leases.fetch_add(1, Ordering::Relaxed);
        HubLease { hub }
    }

    /// A lease on a new task's hub, not registered yet (see [`Hub::registered`]).
    fn unregistered_lease(hub: Arc<Hub>) -> HubLease {
        hub.leases.fetch_add(1, Ordering::Relaxed);
        HubLease { hub }
    }

    /// Registers a new task's hub as it is announced. Whoever announces holds a lease, so
    /// the hub is live; a task id is new, so no other hub holds it.
    fn register(&self, hub: &Arc<Hub>) {
        if hub.registered.swap(true, Ordering::AcqRel) {
            return;
        }
        self.hubs()
            .entry(hub.task_id.clone())
            .or_insert_with(|| hub.clone());
    }

    fn release(&self, hub: &Arc<Hub>) {
        if hub.leases.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        // Never registered (a direct answer): nothing to take out, no lock to take.
        if !hub.registered.load(Ordering::Acquire) {
            return;
        }
        let mut hubs = self.hubs();
        if hub.leases.load(Ordering::Acquire) == 0
            && hubs.get(&hub.task_id).is_some_and(|h| Arc::ptr_eq(h, hub))
        {
            hubs.remove(&hub.task_id);
        }
    }

    /// `caller`'s task as stored; another caller's is not found, exactly as a task that does
    /// not exist.
    async fn owned(&self, task_id: &str, caller: Option<&str>) -> Result<Task, RpcError> {
        self.store
            .get(task_id)
            .await
            .map_err(internal)?
            .filter(|t| t.owner.as_deref() == caller)
            .ok_or_else(RpcError::task_not_found)
    }

    /// Whether another replica sharing the store runs a turn of `task_id` now.
    async fn running_elsewhere(&self, task_id: &str) -> Result<bool, RpcError> {
        self.store
            .running_elsewhere(task_id)
            .await
            .map_err(|e| RpcError::internal(e.to_string()))
    }

    /// The live hub of a task, or one loaded from the store, when `caller` owns the task.
    /// Another caller's task is not found, exactly as a task that does not exist.
    pub(super) async fn open(
        self: &Arc<Self>,
        task_id: &str,
        caller: Option<&str>,
    ) -> Result<HubLease, RpcError> {
        self.load(task_id, caller, true, None).await
    }

    /// [`open`](Self::open), recovering an orphan only with `orphans` (a worker taking a
    /// queued turn decides for itself); `known`: the task as just read from the store, not
    /// read again.
    async fn load(
        self: &Arc<Self>,
        task_id: &str,
        caller: Option<&str>,
        orphans: bool,
        known: Option<Task>,
    ) -> Result<HubLease, RpcError> {
        let live = self.hubs().get(task_id).cloned();
        if let Some(hub) = live {
            if hub.owner.as_deref() != caller {
                return Err(RpcError::task_not_found());
            }
            return Ok(self.lease(hub));
        }
        let known = match known {
            Some(task) => Some(task),
            None => self
                .store
                .get(task_id)
                .await
                .map_err(|e| RpcError::internal(e.to_string()))?,
        };
        let mut task = known
            .filter(|t| t.owner.as_deref() == caller)
            .ok_or_else(RpcError::task_not_found)?;
        let push = self
            .store
            .list_push(task_id)
            .await
            .map_err(|e| RpcError::internal(e.to_string()))?;
        let mut pushes = Vec::new();
        if orphans && is_orphan(&task) {
            if self.running_elsewhere(task_id).await? {
                return Err(elsewhere(task_id));
            }
            recover(&mut task);
            pushes = self.outgoing(&push, &task);
            self.store
                .save_with_pushes(&task, &pushes)
                .await
                .map_err(|e| RpcError::internal(e.to_string()))?;
        }
        let lease = self.lease(Arc::new(Hub::new(task, true, push, self.clone())));
        lease.hub.send_pushes(pushes);
        Ok(lease)
    }

    /// Starts a turn for `params`, once per idempotency key: with a key the envelope names
    /// that an earlier request of this caller claimed, the same request gets that request's
    /// task ([`Started::Again`]) and a different one an error.
    ///
    /// `answer`: a plain send's `blocking` (it waits for one event, see [`Waiter`]); `None`
    /// for a stream, which follows them all. A new task sent without waiting is queued for the
    /// agent's workers when there is a queue (see [`super::queue`]).
    pub(super) async fn start(
        self: &Arc<Self>,
        params: MessageSendParams,
        caller: Option<&str>,
        admitted: Admitted,
        answer: Option<bool>,
    ) -> Result<Started, RpcError> {
        // Not blocking: the caller asked for no more than the task's first snapshot.
        let queue = answer == Some(false)
            && self.queue.is_some()
            && params.message.task_id.is_none()
            // The caller's token is held in memory only: a request carrying one runs here.
            && admitted.subject_token.is_none();
        // The envelope (shared) held here for its key: `admitted` moves into the turn.
        let envelope = admitted.envelope.clone();
        let Some(key) = envelope
            .as_deref()
            .and_then(|e| e.idempotency_key.as_deref())
        else {
            return self
                .begin(params, caller, admitted, None, queue, answer)
                .await
                .map(Started::Turn);
        };
        let scope = caller.unwrap_or("anonymous");
        let claim = KeyClaim {
            task_id: params.message.task_id.clone().unwrap_or_else(crate::new_id),
            fingerprint: self.store.fingerprint(&params.message),
        };
        let store_error = |e: crate::store::StoreError| match e {
            crate::store::StoreError::Unsupported(_) => RpcError::unsupported(format!(
                "this agent's task store keeps no idempotency keys: {e}"
            )),
            e => RpcError::internal(e.to_string()),
        };
        let expires = crate::time::now_unix_millis() + self.idempotency_window.as_millis() as i64;
        let mut settle_until = None;
        loop {
            let held = self
                .store
                .claim_key(scope, key, &claim, expires)
                .await
                .map_err(store_error)?;
            let Some(held) = held else {
                // The claim is the store's now: its id is moved, not copied.
                let new_id = params.message.task_id.is_none().then_some(claim.task_id);
                return match self
                    .begin(params, caller, admitted, new_id, queue, answer)
                    .await
                {
                    Ok(turn) => Ok(Started::Turn(turn)),
                    Err(e) => {
                        // Nothing started: a corrected retry may use the key.
                        if let Err(e) = self.store.release_key(scope, key).await {
                            tracing::warn!("idempotency key not released: {e}");
                        }
                        Err(e)
                    }
                };
            };
            if held.fingerprint != claim.fingerprint {
                return Err(RpcError::invalid_params(format!(
                    "idempotency key {key:?} was used for a different request (task {}); use a \
                     new key for a new request",
                    held.task_id
                )));
            }
            match self.open(&held.task_id, caller).await {
                Ok(lease) if interrupted_by_restart(&lease).await => {
                    // The first request's turn died with its server: the repeat runs it
                    // again, on the same task (an agent with a checkpoint resumes there).
                    drop(lease);
                    let mut params = params;
                    params.message.task_id = Some(held.task_id);
                    return self
                        .begin(params, caller, admitted, None, false, answer)
                        .await
                        .map(Started::Turn);
                }
                Ok(lease) => return Ok(Started::Again(lease)),
                Err(e) if e.code != crate::error::code::TASK_NOT_FOUND => return Err(e),
                Err(_) => {
                    // The first request is between its claim and its task (microseconds), or
                    // its server died there, or (a store that drops finished tasks past a cap,
                    // in this process only) its task was dropped: wait a little, then take the
                    // key over, or refuse where running the repeat would do the work twice.
                    let forgets = self.store.forgets_finished();
                    let settle = if forgets {
                        FORGOTTEN_SETTLE
                    } else {
                        CLAIM_SETTLE
                    };
                    let until = *settle_until.get_or_insert_with(|| Instant::now() + settle);
                    if Instant::now() < until {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                    if forgets {
                        return Err(RpcError::invalid_params(format!(
                            "idempotency key {key:?} names task {}, which this server no longer \
                             holds (its task store keeps only the newest finished tasks); send \
                             the request with a new key to run it again",
                            held.task_id
                        )));
                    }
                    self.store
                        .release_key(scope, key)
                        .await
                        .map_err(store_error)?;
                    settle_until = Some(Instant::now() + CLAIM_SETTLE);
                }
            }
        }
    }

    /// What a repeated request follows: the task now, and the running turn's events from
    /// now on (`None` when no turn runs: the snapshot is the whole answer).
    pub(super) async fn follow(
        lease: &HubLease,
    ) -> (Task, Option<broadcast::Receiver<Arc<StreamEvent>>>) {
        let mut st = lease.hub.state.lock().await;
        let capacity = lease.hub.agent.stream_buffer;
        let rx = (st.running && !st.turn_over).then(|| st.subscribe(capacity));
        (st.task.clone(), rx)
    }

    /// Starts a turn for `params`: a new task (with id `new_id` when given), or the next turn
    /// of an interrupted one. With `queue`, a new task is stored and queued for the agent's
    /// workers instead (the turn's receiver gets its snapshot). `answer`: a plain send's
    /// `blocking`, its turn followed by a [`Waiter`]; `None`: a stream's.
    async fn begin(
        self: &Arc<Self>,
        params: MessageSendParams,
        caller: Option<&str>,
        admitted: Admitted,
        new_id: Option<String>,
        queue: bool,
        answer: Option<bool>,
    ) -> Result<Turn, RpcError> {
        let Admitted {
            envelope,
            instructions,
            scopes,
            subject_token,
        } = admitted;
        let MessageSendParams {
            mut message,
            configuration,
            metadata,
        } = params;
        let fresh = message.task_id.is_none();
        let lease = match message.task_id.clone() {
            Some(task_id) => self.open(&task_id, caller).await?,
            None => {
                let context_id = message.context_id.clone().unwrap_or_else(crate::new_id);
                // A key's repeat looks the task up by the id the key names: that hub must be
                // findable (and its task shown) from the start. Otherwise nobody knows the id
                // before it is announced, and the task is stamped then: a turn answered with
                // a message never shows it.
                let keyed = envelope
                    .as_ref()
                    .is_some_and(|e| e.idempotency_key.is_some());
                let mut task = Task::unstamped(new_id.unwrap_or_else(crate::new_id), context_id);
                if keyed {
                    task.stamp();
                }
                task.owner = caller.map(str::to_owned);
                // The envelope is recorded on the task: who asked under which correlation
                // id stays visible to `tasks/get` and survives restarts.
                task.envelope = envelope.clone();
                let hub = Arc::new(Hub::new(task, false, Vec::new(), self.clone()));
                if keyed {
                    self.lease(hub)
                } else {
                    Self::unregistered_lease(hub)
                }
            }
        };
        let hub = lease.hub.clone();
        // The previous turn's final event is out but its agent has not returned yet (a
        // client answering at once): wait for it, a little, rather than refuse the message.
        let ended = hub.ended.notified();
        let returning = {
            let st = hub.state.lock().await;
            st.running && st.turn_over
        };
        if returning {
            let _ = tokio::time::timeout(TURN_END_WAIT, ended).await;
        }
        let (previous, events) = {
            let mut st = hub.state.lock().await;
            let state = st.task.state();
            if state.is_terminal() {
                return Err(RpcError::unsupported(format!(
                    "task {} is {state} and takes no more messages; start a new task",
                    hub.task_id
                )));
            }
            if st.running {
                return Err(RpcError::unsupported(format!(
                    "task {} is still working on the previous message; wait for it or cancel it",
                    hub.task_id
                )));
            }
            if st.task.parked && state == TaskState::Submitted {
                return Err(RpcError::unsupported(format!(
                    "task {} is queued for a worker of this agent; wait for its answer or cancel \
                     it",
                    hub.task_id
                )));
            }
            if message
                .context_id
                .as_deref()
                .is_some_and(|c| c != hub.context_id)
            {
                return Err(RpcError::invalid_params(format!(
                    "params.message.contextId does not match task {}'s context {}",
                    hub.task_id, hub.context_id
                )));
            }
            // A task is rewritten on every save: its size must stay bounded (a new one is by
            // the body limit, usually: counting it was 4% of a message echo's work).
            if !(fresh && self.new_tasks_fit)
                && json_len(&st.task) + json_len(&message) > MAX_TASK_BYTES
            {
                return Err(RpcError::invalid_params(format!(
                    "task {} is too large to take more messages (at most {} MiB in all); start a \
                     new task",
                    hub.task_id,
                    MAX_TASK_BYTES >> 20
                )));
            }
            // Checked before anything changes: a refused config refuses the whole message.
            if let Some(cfg) = configuration
                .as_ref()
                .and_then(|c| c.push_notification_config.clone())
            {
                room_for(&st.push, &normalize_push(cfg, &hub.task_id))?;
            }
            // Replicas sharing the store: one turn of a task at a time, wherever messages
            // land (a new task is this process's alone).
            if st.stored
                && !self
                    .store
                    .take_turn(&hub.task_id)
                    .await
                    .map_err(|e| RpcError::internal(e.to_string()))?
            {
                return Err(elsewhere(&hub.task_id));
            }
            let previous = st.stored.then(|| st.task.clone());
            message.task_id = Some(hub.task_id.clone());
            message.context_id = Some(hub.context_id.clone());
            st.task.history.push(message.clone());
            if let Some(cfg) = configuration
                .as_ref()
                .and_then(|c| c.push_notification_config.clone())
            {
                let cfg = normalize_push(cfg, &hub.task_id);
                self.store
                    .set_push(&hub.task_id, &cfg)
                    .await
                    .map_err(|e| RpcError::internal(e.to_string()))?;
                upsert_push(&mut st.push, cfg);
            }
            let events = match answer {
                Some(blocking) => {
                    let (tx, rx) = oneshot::channel();
                    st.waiter = Some(Waiter { blocking, tx });
                    Events::Answer(rx)
                }
                None => Events::Stream(st.subscribe(self.stream_buffer)),
            };
            if queue {
                // Stored as waiting (parked: nobody takes it for an orphan), then announced.
                self.register(&hub);
                st.task.stamp();
                st.task.parked = true;
                let pushes = hub.save_now(&st).await?;
                st.stored = true;
                st.announced = true;
                hub.publish_snapshot(&mut st);
                hub.send_pushes(pushes);
                drop(st);
                let job = Job {
                    task_id: hub.task_id.clone(),
                    message_id: message.message_id.clone(),
                    owner: hub.owner.clone(),
                    configuration,
                    metadata,
                    envelope: envelope.as_deref().cloned(),
                    instructions,
                    scopes: scopes.map(|s| s.to_vec()),
                };
                self.enqueue(&hub, job).await?;
                self.metrics.queued.fetch_add(1, Ordering::Relaxed);
                return Ok(Turn {
                    lease,
                    events,
                    run: None,
                });
            }
            st.begin_turn(false);
            (previous, events)
        };
        let ctx = RequestContext {
            task_id: hub.task_id.clone(),
            context_id: hub.context_id.clone(),
            message,
            previous,
            configuration,
            metadata,
            envelope,
            instructions,
            caller: caller.map(str::to_owned),
            scopes,
            subject_token,
            rerun: false,
            cancel: hub.cancel.subscribe(),
        };
        let run = self.run(&lease, ctx);
        Ok(Turn {
            lease,
            events,
            run: Some(run),
        })
    }

    /// Runs the agent for a turn set up on `lease`'s hub (its state `running`) on a task of
    /// its own, ending the turn when the agent returns; the handle resolves then.
    fn launch(
        self: &Arc<Self>,
        lease: &HubLease,
        ctx: RequestContext,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.run(lease, ctx))
    }

    /// The agent's run for a turn set up on `lease`'s hub (its state `running`), ending the
    /// turn when the agent returns: driven by the request that started it, or on its own
    /// task (see [`Run`]).
    fn run(self: &Arc<Self>, lease: &HubLease, ctx: RequestContext) -> Run {
        let run_lease = lease.another();
        let executor = self.executor.clone();
        // The agent's run, a child of the request's span (GenAI conventions: `invoke_agent`).
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = format!("invoke_agent {}", self.agent),
            otel.kind = "internal",
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %self.agent,
            gen_ai.conversation.id = %ctx.context_id,
            a2a.task_id = %ctx.task_id,
            agentry.correlation_id = ctx.envelope.as_ref().and_then(|e| e.correlation_id.as_deref()),
        );
        let run_span = span.clone();
        // The future is moved whole when it is boxed or spawned: the request context rides
        // in a box and the turn's end is boxed where it is awaited, so the future stays a few
        // pointers wide (measured: memcpy was ~2,600 instructions of a message echo's 68,000).
        let ctx = Box::new(ctx);
        Run(Some(Box::pin(
            async move {
                let hub = run_lease.hub.clone();
                // A panicking agent fails its task instead of leaving callers waiting.
                let result =
                    AssertUnwindSafe(executor.execute_dyn(*ctx, EventSink::new(hub.clone())))
                        .catch_unwind()
                        .await
                        .unwrap_or_else(|_| {
                            Err(ExecutorError::failed("the agent crashed (panic)"))
                        });
                if result.is_err() {
                    run_span.record("otel.status_code", "error");
                }
                Box::pin(hub.end_turn(result)).await;
                drop(run_lease);
            }
            .instrument(span),
        )))
    }

    /// Queues the turn of a new task just stored for the agent's workers; when the queue does
    /// not take it, the task fails saying so (and the caller gets the error).
    async fn enqueue(&self, hub: &Arc<Hub>, job: Job) -> Result<(), RpcError> {
        let Some(q) = &self.queue else {
            return Ok(());
        };
        let body = serde_json::to_vec(&job).map_err(|e| RpcError::internal(e.to_string()))?;
        let Err(e) = q.queue.push(q.name_for(&self.agent), body).await else {
            return Ok(());
        };
        let why = format!("the task could not be queued for a worker: {e}");
        let mut st = hub.state.lock().await;
        st.task.parked = false;
        let failed = TaskStatus::now(TaskState::Failed, Some(hub.agent_text(why.clone())));
        if st.task.transition(failed).is_ok() {
            match hub.save_now(&st).await {
                Ok(pushes) => hub.send_pushes(pushes),
                Err(e) => {
                    tracing::warn!(task = %hub.task_id, "the unqueued task could not be stored failed: {}", e.message)
                }
            }
            let ev = StreamEvent::final_status(&st.task);
            hub.publish(&mut st, ev);
        }
        Err(RpcError::internal(why))
    }

    /// Runs one queued turn on this worker and settles it: done once the agent returned, or
    /// when there is nothing to run (the turn is over, the task canceled or gone); handed out
    /// again when it cannot run here now (another replica runs the task, the store does not
    /// answer).
    async fn run_job(self: &Arc<Self>, claimed: Claimed<Vec<u8>>) {
        let job = match serde_json::from_slice::<Job>(&claimed.item) {
            Ok(job) => job,
            Err(e) => {
                tracing::warn!("a queued turn does not decode, dropped: {e}");
                return claimed.ack().await;
            }
        };
        match self.take_job(job).await {
            Ok(Some(turn)) => {
                let _ = turn.await;
                claimed.ack().await;
            }
            Ok(None) => claimed.ack().await,
            Err(why) => {
                tracing::debug!("a queued turn is handed back: {why}");
                claimed.retry().await;
            }
        }
    }

    /// Sets up a queued turn and launches its agent; `None` when there is nothing to run;
    /// `Err` when it cannot run here now.
    async fn take_job(
        self: &Arc<Self>,
        job: Job,
    ) -> Result<Option<tokio::task::JoinHandle<()>>, String> {
        // Stored running with no turn here: a worker that died left it, or one still at work
        // runs it. Its hold tells which before a hub is made for it here (a hub here would
        // take in this replica's subscribers, and the running worker's events never reach
        // it). Another turn's orphan (a later message's) is not this job's to run.
        // The task read here is the one the hub is made from (one read per job, not two).
        let mut taken = false;
        let mut stored = None;
        if !self.hubs().contains_key(&job.task_id) {
            stored = self
                .store
                .get(&job.task_id)
                .await
                .map_err(|e| e.to_string())?;
        }
        if let Some(t) = stored.as_ref().filter(|t| is_orphan(t)) {
            if !is_last_turn(t, &job.message_id) {
                return Ok(None);
            }
            if !self
                .store
                .take_turn(&job.task_id)
                .await
                .map_err(|e| e.to_string())?
            {
                return Err(format!("task {} is held by another replica", job.task_id));
            }
            taken = true;
        }
        let lease = match self
            .load(&job.task_id, job.owner.as_deref(), false, stored)
            .await
        {
            Ok(lease) => lease,
            Err(e) if e.code == crate::error::code::TASK_NOT_FOUND => {
                tracing::warn!("queued task {} is not in the store; dropped", job.task_id);
                return Ok(None);
            }
            Err(e) => return Err(e.message),
        };
        let hub = lease.hub.clone();
        let mut st = hub.state.lock().await;
        if st.running {
            return Err(format!("task {} runs here now", job.task_id));
        }
        let Some(at) = st
            .task
            .history
            .iter()
            .rposition(|m| m.message_id == job.message_id)
        else {
            return Ok(None);
        };
        let state = st.task.state();
        let last = is_last_turn(&st.task, &job.message_id);
        // Waiting in the queue: the turn runs. Left running by a worker that died (taken
        // above): it runs again. Recovered (see `recover`) after a worker died, when the
        // queue took longer than the store's grace to bring it here: it runs again. Anything
        // else: its turn is over.
        let waiting = st.task.parked && state == TaskState::Submitted;
        let left = taken && is_orphan(&st.task) && last;
        let cut_short = recovered(&st.task) && last;
        if !waiting && !left && !cut_short {
            return Ok(None);
        }
        if !taken
            && !self
                .store
                .take_turn(&job.task_id)
                .await
                .map_err(|e| e.to_string())?
        {
            return Err(format!("task {} is held by another replica", job.task_id));
        }
        if left || cut_short {
            self.metrics.takeovers.fetch_add(1, Ordering::Relaxed);
        }
        self.metrics.worked.fetch_add(1, Ordering::Relaxed);
        let message = st.task.history[at].clone();
        st.begin_turn(true);
        drop(st);
        let ctx = RequestContext {
            task_id: hub.task_id.clone(),
            context_id: hub.context_id.clone(),
            message,
            previous: None,
            configuration: job.configuration,
            metadata: job.metadata,
            envelope: job.envelope.map(Arc::new),
            instructions: job.instructions,
            caller: job.owner,
            scopes: job.scopes.map(Arc::from),
            subject_token: None,
            rerun: left || cut_short,
            cancel: hub.cancel.subscribe(),
        };
        Ok(Some(self.launch(&lease, ctx)))
    }

    /// The current task: from its live hub when it has one (fresher than the store while a
    /// turn runs), else from the store (an orphan recovered first, see [`is_orphan`]).
    pub(super) async fn snapshot(
        self: &Arc<Self>,
        task_id: &str,
        caller: Option<&str>,
    ) -> Result<Task, RpcError> {
        let live = self.hubs().get(task_id).cloned();
        if let Some(hub) = live {
            if hub.owner.as_deref() != caller {
                return Err(RpcError::task_not_found());
            }
            let st = hub.state.lock().await;
            if st.stored {
                return Ok(st.task.clone());
            }
        }
        let task = self.owned(task_id, caller).await?;
        if is_orphan(&task)
            && !self.hubs().contains_key(task_id)
            && !self.running_elsewhere(task_id).await?
        {
            let lease = self.open(task_id, caller).await?;
            return Ok(lease.hub.state.lock().await.task.clone());
        }
        Ok(task)
    }

    /// Tasks as listed, an orphan among them recovered first (see [`is_orphan`]).
    pub(super) async fn recovered(
        self: &Arc<Self>,
        tasks: Vec<Task>,
        caller: Option<&str>,
    ) -> Result<Vec<Task>, RpcError> {
        let mut out = Vec::with_capacity(tasks.len());
        for t in tasks {
            if is_orphan(&t)
                && !self.hubs().contains_key(&t.id)
                && !self.running_elsewhere(&t.id).await?
            {
                let lease = self.open(&t.id, caller).await?;
                out.push(lease.hub.state.lock().await.task.clone());
            } else {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// Cancels a task that is not yet final; returns it canceled.
    pub(super) async fn cancel(
        self: &Arc<Self>,
        task_id: &str,
        caller: Option<&str>,
    ) -> Result<Task, RpcError> {
        let mut taken = false;
        if let Some(bus) = &self.events
            && !self.hubs().contains_key(task_id)
            && self.running_elsewhere(task_id).await?
        {
            taken = self.take_abandoned_queued(task_id, caller).await?;
            if !taken {
                return self.cancel_elsewhere(bus.as_ref(), task_id, caller).await;
            }
        }
        // Taken: the task as stored now, not recovered (it is canceled instead).
        let lease = match taken {
            true => self.load(task_id, caller, false, None).await?,
            false => self.open(task_id, caller).await?,
        };
        let hub = &lease.hub;
        let task = {
            let mut st = hub.state.lock().await;
            let state = st.task.state();
            if state.is_terminal() {
                return Err(RpcError::task_not_cancelable(task_id, state));
            }
            st.task
                .transition(TaskStatus::now(TaskState::Canceled, None))
                .map_err(|e| RpcError::internal(e.to_string()))?;
            let pushes = hub.save_now(&st).await?;
            st.turn_over = true;
            let ev = StreamEvent::final_status(&st.task);
            hub.publish(&mut st, ev);
            hub.send_pushes(pushes);
            st.task.clone()
        };
        let _ = hub.cancel.send(true);
        let executor = self.executor.clone();
        let id = task_id.to_owned();
        tokio::spawn(async move { executor.cancel_dyn(&id).await });
        Ok(task)
    }

    /// Subscribes to a task: its snapshot now, and a receiver for every change after it.
    pub(super) async fn subscribe(
        self: &Arc<Self>,
        task_id: &str,
        caller: Option<&str>,
    ) -> Result<Subscription, RpcError> {
        // Events shared with replicas and no turn of it here: its next change may happen on
        // any replica (the one running its turn, or one a cancel reaches), so it is followed
        // through the shared events, subscribed before the snapshot is read so that no event
        // between the two is lost. An orphan of a dead process is recovered first, below.
        if let Some(bus) = &self.events
            && !self.hubs().contains_key(task_id)
        {
            let follow = bus
                .follow(&self.agent, task_id)
                .await
                .map_err(|e| RpcError::internal(format!("cannot follow the task: {e}")))?;
            let task = self.owned(task_id, caller).await?;
            if !is_orphan(&task) || self.running_elsewhere(task_id).await? {
                let state = task.state();
                if state.is_terminal() {
                    return Err(RpcError::unsupported(format!(
                        "task {task_id} is {state}: there is nothing more to stream (get it \
                         instead)"
                    )));
                }
                return Ok(Subscription::Elsewhere(task, follow));
            }
        }
        let lease = self.open(task_id, caller).await?;
        let (task, rx) = {
            let mut st = lease.hub.state.lock().await;
            // A finished task has nothing more to stream (A2A 1.0: UnsupportedOperationError;
            // the 0.3 SDKs refuse it too). Checked under the lock: no final event slips
            // between the check and the subscription.
            let state = st.task.state();
            if state.is_terminal() {
                return Err(RpcError::unsupported(format!(
                    "task {task_id} is {state}: there is nothing more to stream (get it instead)"
                )));
            }
            let rx = st.subscribe(self.stream_buffer);
            (st.task.clone(), rx)
        };
        Ok(Subscription::Here(lease, task, rx))
    }

    /// Takes the hold of `caller`'s queued task whose worker died: its hold lapsed and the
    /// queue has not handed the turn to another worker yet (the store's grace), so nobody
    /// would hear a cancel sent to the replica running it. Taken, it is canceled here, and
    /// the worker the turn goes to finds it over. `false`: a live replica holds it (or it is
    /// not a queued turn), which a cancel must reach instead.
    async fn take_abandoned_queued(
        &self,
        task_id: &str,
        caller: Option<&str>,
    ) -> Result<bool, RpcError> {
        let task = self.owned(task_id, caller).await?;
        if !task.queued || task.state().is_terminal() {
            return Ok(false);
        }
        self.store.take_turn(task_id).await.map_err(internal)
    }

    /// Cancels a task whose turn runs on another replica: asks it through the shared events
    /// and waits (at most [`CANCEL_WAIT`]) for the turn's final event, then answers with the
    /// task as stored.
    async fn cancel_elsewhere(
        &self,
        bus: &dyn super::TaskEvents,
        task_id: &str,
        caller: Option<&str>,
    ) -> Result<Task, RpcError> {
        let task = self.owned(task_id, caller).await?;
        let state = task.state();
        if state.is_terminal() {
            return Err(RpcError::task_not_cancelable(task_id, state));
        }
        let mut follow = bus
            .follow(&self.agent, task_id)
            .await
            .map_err(|e| RpcError::internal(format!("cannot follow the task: {e}")))?;
        bus.request_cancel(&self.agent, task_id);
        let ended = tokio::time::timeout(CANCEL_WAIT, async {
            while let Some(bytes) = follow.next().await {
                if super::events::decode(&bytes).is_some_and(|ev| ev.is_final()) {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap_or(false);
        // The running replica saves the final state before it publishes it.
        let task = self.owned(task_id, caller).await?;
        match task.state() {
            TaskState::Canceled => Ok(task),
            s if s.is_terminal() => Err(RpcError::task_not_cancelable(task_id, s)),
            _ if !ended => Err(RpcError::internal(format!(
                "the replica running task {task_id} did not confirm the cancel within {} s",
                CANCEL_WAIT.as_secs()
            ))),
            s => Err(RpcError::task_not_cancelable(task_id, s)),
        }
    }

    /// The task as stored, when its status changed since `since` (the status timestamp a
    /// followed stream started from) to one that ends a turn (a followed stream asks, in case
    /// the replica that ran the turn died before its final event reached the bus, or the
    /// event was lost); `None` otherwise (or when the store does not answer).
    pub(super) async fn turn_ended(&self, task_id: &str, since: Option<&str>) -> Option<Task> {
        let task = self.store.get(task_id).await.ok().flatten()?;
        (task.state().ends_turn() && task.status.timestamp.as_deref() != since).then_some(task)
    }

    /// Adds a push config to a task (live or stored).
    pub(super) async fn set_push(
        self: &Arc<Self>,
        task_id: &str,
        cfg: PushNotificationConfig,
        caller: Option<&str>,
    ) -> Result<PushNotificationConfig, RpcError> {
        if let Some(bus) = self.push_runs_elsewhere(task_id, caller).await? {
            let cfg = normalize_push(cfg, task_id);
            let configs = self.store.list_push(task_id).await.map_err(internal)?;
            room_for(&configs, &cfg)?;
            self.store.set_push(task_id, &cfg).await.map_err(internal)?;
            bus.request_push_reload(&self.agent, task_id);
            return Ok(cfg);
        }
        let lease = self.open(task_id, caller).await?;
        let cfg = normalize_push(cfg, task_id);
        let mut st = lease.hub.state.lock().await;
        room_for(&st.push, &cfg)?;
        self.store
            .set_push(task_id, &cfg)
            .await
            .map_err(|e| RpcError::internal(e.to_string()))?;
        upsert_push(&mut st.push, cfg.clone());
        Ok(cfg)
    }

    pub(super) async fn delete_push(
        self: &Arc<Self>,
        task_id: &str,
        config_id: &str,
        caller: Option<&str>,
    ) -> Result<(), RpcError> {
        if let Some(bus) = self.push_runs_elsewhere(task_id, caller).await? {
            self.store
                .delete_push(task_id, config_id)
                .await
                .map_err(internal)?;
            bus.request_push_reload(&self.agent, task_id);
            return Ok(());
        }
        let lease = self.open(task_id, caller).await?;
        let mut st = lease.hub.state.lock().await;
        self.store
            .delete_push(task_id, config_id)
            .await
            .map_err(|e| RpcError::internal(e.to_string()))?;
        st.push.retain(|c| c.id.as_deref() != Some(config_id));
        Ok(())
    }

    /// The bus to tell, when `caller`'s task `task_id` has a turn running on another replica
    /// sharing the store: its push configs are changed in the store and that replica told to
    /// read them again (it sends the turn's notifications). `None`: changed here.
    async fn push_runs_elsewhere(
        &self,
        task_id: &str,
        caller: Option<&str>,
    ) -> Result<Option<Arc<dyn super::TaskEvents>>, RpcError> {
        let Some(bus) = &self.events else {
            return Ok(None);
        };
        if self.hubs().contains_key(task_id) || !self.running_elsewhere(task_id).await? {
            return Ok(None);
        }
        self.owned(task_id, caller).await?;
        Ok(Some(bus.clone()))
    }

    /// Reads a live task's push configs from the store again (another replica changed them).
    async fn reload_push(&self, task_id: &str) {
        let hub = self.hubs().get(task_id).cloned();
        let Some(hub) = hub else { return };
        let mut st = hub.state.lock().await;
        match self.store.list_push(task_id).await {
            Ok(configs) => st.push = configs,
            Err(e) => tracing::warn!(task = task_id, "push configs not read again: {e}"),
        }
    }
}

/// How long a cancel asked of another replica waits for that replica's final event.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// Cancels the turns running here that another replica was asked to cancel, while the agent
/// is served.
async fn cancels(
    tasks: std::sync::Weak<AgentTasks>,
    bus: Arc<dyn super::TaskEvents>,
    agent: String,
) {
    let mut requests = match bus.cancel_requests(&agent).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("cannot hear cancel requests from other replicas: {e}");
            return;
        }
    };
    while let Some(task_id) = requests.next().await {
        let Some(tasks) = tasks.upgrade() else {
            return;
        };
        let live = tasks.hubs().get(&task_id).map(|hub| hub.owner.clone());
        if let Some(owner) = live
            && let Err(e) = tasks.cancel(&task_id, owner.as_deref()).await
        {
            tracing::debug!("cancel of task {task_id} asked by a replica: {}", e.message);
        }
    }
}

/// Reads again the push configs of the turns running here that another replica changed,
/// while the agent is served.
async fn push_reloads(
    tasks: std::sync::Weak<AgentTasks>,
    bus: Arc<dyn super::TaskEvents>,
    agent: String,
) {
    let mut requests = match bus.push_reloads(&agent).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("cannot hear push config changes from other replicas: {e}");
            return;
        }
    };
    while let Some(task_id) = requests.next().await {
        let Some(tasks) = tasks.upgrade() else {
            return;
        };
        tasks.reload_push(&task_id).await;
    }
}

/// A store error as the protocol's internal error.
fn internal(e: crate::store::StoreError) -> RpcError {
    RpcError::internal(e.to_string())
}

/// Pulls queued turns of the agent and runs them, at most `q.workers` at once, while the
/// agent is served.
async fn work(tasks: std::sync::Weak<AgentTasks>, q: Queueing, agent: String) {
    let slots = Arc::new(tokio::sync::Semaphore::new(q.workers));
    let mut jobs = q.queue.pull(q.name_for(&agent));
    loop {
        // A slot first: a job is taken from the queue only when it can start at once.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let Some(job) = jobs.next().await else {
            return;
        };
        // Dropped unsettled when the agent is no longer served: another worker gets it.
        let Some(tasks) = tasks.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            tasks.run_job(job).await;
            drop(slot);
        });
    }
}

/// Every `every`, takes over and recovers (as [`AgentTasks::open`] recovers an orphan: the
/// task moves to input-required, saying why, and its webhooks hear it) the tasks replicas that
/// died were running, while the agent is served.
async fn sweep(tasks: std::sync::Weak<AgentTasks>, every: Duration) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(tasks) = tasks.upgrade() else {
            return;
        };
        // Notifications first: a task's webhooks hear what the stopped replica owed them
        // before the recovery below (lanes deliver in the order queued).
        if let Some(push) = &tasks.push {
            match tasks.store.abandoned_pushes(256).await {
                Ok(items) if !items.is_empty() => {
                    tracing::info!(
                        "sending {} push notification(s) a stopped replica left",
                        items.len()
                    );
                    push.queue(items, Some(&tasks.store));
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("cannot look for push notifications left: {e}"),
            }
        }
        let left = match tasks.store.abandoned(64).await {
            Ok(left) => left,
            Err(e) => {
                tracing::warn!("cannot look for tasks of stopped replicas: {e}");
                continue;
            }
        };
        for t in left {
            // Taken first: of replicas sweeping at once, one recovers it.
            match tasks.store.take_turn(&t.task_id).await {
                Ok(true) => match tasks.open(&t.task_id, t.owner.as_deref()).await {
                    Ok(lease) => {
                        tracing::info!("took over task {} from a replica that stopped", t.task_id);
                        tasks.metrics.takeovers.fetch_add(1, Ordering::Relaxed);
                        drop(lease);
                    }
                    Err(e) => tracing::warn!("cannot recover task {}: {}", t.task_id, e.message),
                },
                Ok(false) => {}
                Err(e) => tracing::warn!("cannot take over task {}: {e}", t.task_id),
            }
        }
    }
}

/// A task whose turn another replica runs: requests that need the running turn (a message,
/// a subscription, cancel, push configs) go to that replica until task events cross
/// replicas.
fn elsewhere(task_id: &str) -> RpcError {
    RpcError::unsupported(format!(
        "task {task_id} is running on another replica of this agent: send this request to \
         that replica, or again when the turn has ended"
    ))
}

/// Whether a stored task was left mid-turn by a process that is gone. In one process a turn
/// holds its task's hub from start to end, so a task stored as submitted or working with no
/// live hub here (the callers check) was running when an earlier process died (crash, kill,
/// power loss). It cannot go on by itself. A parked task ([`Task::parked`]) was not running.
fn is_orphan(task: &Task) -> bool {
    matches!(task.state(), TaskState::Submitted | TaskState::Working) && !task.parked
}

/// What a task interrupted by a server that stopped says.
const RECOVERED: &str = "The server stopped while this task was running. Send your message \
                         again to continue, or cancel the task.";

/// Moves an orphan to input-required, saying why: the caller sends the message again to go
/// on (an agent that checkpoints its runs resumes from the checkpoint), or cancels.
fn recover(task: &mut Task) {
    let said = Message::text(Role::Agent, RECOVERED).in_task(&task.id, &task.context_id);
    // Submitted and working both move to input-required.
    let _ = task.transition(TaskStatus::now(TaskState::InputRequired, Some(said)));
}

/// A config without an id gets the task's id, as the official SDKs do.
fn normalize_push(mut cfg: PushNotificationConfig, task_id: &str) -> PushNotificationConfig {
    if cfg.id.as_deref().is_none_or(str::is_empty) {
        cfg.id = Some(task_id.to_owned());
    }
    cfg
}

/// A task's size as stored, at most: it is rewritten on every save, so a client that keeps
/// sending large messages to one task would make every save slower without end.
pub const MAX_TASK_BYTES: usize = 16 << 20;

/// Whether a request body limit alone keeps every new task under [`MAX_TASK_BYTES`]. A new
/// task's JSON is its first message and a little more: the message's JSON is at most 3.5
/// times its part of the body (the largest growth is a minimal part: `{"raw":""}`, 10 bytes,
/// is `{"kind":"file","file":{"bytes":""}}`, 35; text and data keep their length; metadata
/// is counted twice at most, once on the message and once as the task's envelope), plus ids,
/// a status and the envelope's header fields, under 4 KiB. A quarter of the cap leaves room.
fn fits_by_body_limit(body_limit: usize) -> bool {
    body_limit <= MAX_TASK_BYTES / 4
}

/// Bytes of `v`'s JSON, counted without building it.
fn json_len(v: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// Webhooks one task may have: each state change is POSTed to every one of them, so without a
/// cap one message could make the server send hundreds of requests.
pub const MAX_PUSH_CONFIGS: usize = 10;

/// Refuses a new config (not a replacement) beyond [`MAX_PUSH_CONFIGS`].
fn room_for(list: &[PushNotificationConfig], cfg: &PushNotificationConfig) -> Result<(), RpcError> {
    if list.len() >= MAX_PUSH_CONFIGS && !list.iter().any(|c| c.id == cfg.id) {
        return Err(RpcError::invalid_params(format!(
            "a task has at most {MAX_PUSH_CONFIGS} push notification configs: delete one first"
        )));
    }
    Ok(())
}

fn upsert_push(list: &mut Vec<PushNotificationConfig>, cfg: PushNotificationConfig) {
    match list.iter_mut().find(|c| c.id == cfg.id) {
        Some(c) => *c = cfg,
        None => list.push(cfg),
    }
}

/// Whether the task's last turn was cut short by a server that stopped (and nothing ran
/// since): what [`recover`] left.
async fn interrupted_by_restart(lease: &HubLease) -> bool {
    let st = lease.hub.state.lock().await;
    !st.running && recovered(&st.task)
}

/// Whether `message_id` is the task's last message from the user (its turn the latest).
fn is_last_turn(task: &Task, message_id: &str) -> bool {
    task.history
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .is_some_and(|m| m.message_id == message_id)
}

/// Whether `task` is as [`recover`] left it: input-required, saying the server stopped.
fn recovered(task: &Task) -> bool {
    task.state() == TaskState::InputRequired
        && task
            .status
            .message
            .as_ref()
            .is_some_and(|m| m.role == Role::Agent && m.text_content() == RECOVERED)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run dropped before its end (its request answered, or its client gone) goes on on a
    /// task of its own to the end; one driven to its end leaves nothing behind.
    #[tokio::test]
    async fn a_run_dropped_unfinished_runs_to_its_end() {
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let (done_tx, done_rx) = oneshot::channel();
        let g = gate.clone();
        let run = Run(Some(Box::pin(async move {
            g.acquire().await.unwrap().forget();
            let _ = done_tx.send(());
        })));
        drop(run);
        gate.add_permits(1);
        tokio::time::timeout(Duration::from_secs(5), done_rx)
            .await
            .expect("the dropped run went on")
            .expect("and reached its end");

        let polls = Arc::new(AtomicUsize::new(0));
        let p = polls.clone();
        let mut run = Run(Some(Box::pin(async move {
            p.fetch_add(1, Ordering::SeqCst);
        })));
        (&mut run).await;
        (&mut run).await;
        drop(run);
        tokio::task::yield_now().await;
        assert_eq!(
            polls.load(Ordering::SeqCst),
            1,
            "a finished run is not run again"
        );
    }
}
