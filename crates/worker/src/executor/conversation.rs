//! Conversations: each scheduled request of this worker's stripe starts a
//! multi-turn session at its scheduled time; the session's turns then follow
//! one another on this worker, each sent as a `messages` array holding every
//! earlier message and the model's real (streamed) answers, after the think
//! time. Every turn is recorded as a request of its own, scheduled at the end
//! of the previous answer plus the think time (so waiting for a concurrency
//! slot shows as schedule lag). A failed turn ends its session: without an
//! answer there is no honest next turn. In a mixed run the open loop starts
//! a session workload's sessions one per arrival ([`run_session`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cicada_client::backend::Ask;
use cicada_metrics::{EventLog, RequestRecord, Scope};
use cicada_plan::pool::{ChatMessage, Conversation, Prompt, Turn};
use cicada_plan::schedule::Slot;
use cicada_plan::{ConversationSettings, Drive};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::request::{Counting, Placement, exchange, guarded_record};
use super::{Choice, Entry, Step, route};
use crate::recorder::{SessionEnd, SessionTurn};
use cicada_client::clock::Clock;
use cicada_client::exchange::Conduit;
use cicada_client::http::Headers;

/// Run this worker's conversations. `stop` ends starting sessions and turns
/// (turns in flight finish); `cancel` also aborts turns in flight. Returns the
/// number of turns sent.
pub async fn run_conversations(
    step: Arc<Step>,
    clock: Clock,
    stop: CancellationToken,
    cancel: CancellationToken,
) -> u64 {
    let Drive::Open {
        stripe: Some(stripe),
        schedule,
        slots,
        ..
    } = &step.plan.drive
    else {
        return 0;
    };
    let slots = slots.map(|s| Arc::new(Semaphore::new(s as usize)));
    let settings = step.plan.conversations.clone().unwrap_or_default();
    let duration = schedule.duration;
    let sent = Arc::new(AtomicU64::new(0));
    let tracker = TaskTracker::new();
    for slot in schedule.stripe(stripe.index, stripe.count) {
        if stop.is_cancelled() {
            break;
        }
        let due = clock.start() + slot.offset;
        if due > tokio::time::Instant::now() {
            tokio::select! {
                () = tokio::time::sleep_until(due) => {}
                () = stop.cancelled() => break,
            }
        }
        if let Some(d) = duration
            && clock.now_us() >= d.as_micros() as u64
        {
            break;
        }
        let session = Session {
            choice: step.choice(&slot),
            settings: settings.clone(),
            step: step.clone(),
            slot,
            clock,
            stop: stop.clone(),
            cancel: cancel.clone(),
            slots: slots.clone(),
            sent: sent.clone(),
        };
        // boxed for the reason the open loop boxes its requests (see open_loop.rs)
        tracker.spawn(Box::pin(session.run()));
    }
    tracker.close();
    tracker.wait().await;
    sent.load(Ordering::Relaxed)
}

/// What starts one session of a mixed run's session workload (arrival
/// `slot` picked it): where it runs, how to stop it, and where its sent
/// turns are counted.
pub(super) struct Start {
    pub step: Arc<Step>,
    pub slot: Slot,
    pub settings: ConversationSettings,
    pub clock: Clock,
    pub stop: CancellationToken,
    pub cancel: CancellationToken,
    pub sent: Arc<AtomicU64>,
}

/// Run the session arrival `start.slot` begins in a mixed run: the
/// conversation of the pool entry its workload gives it (so its content is
/// the seed's, its workload's and its index's, whatever the worker count),
/// its turns sent and counted as a session run's are, in its workload's
/// scope. A fleet cap's slot, if any, is the caller's to hold for its life.
pub(super) async fn run_session(start: Start) {
    let session = Session {
        choice: start.step.choice(&start.slot),
        settings: start.settings,
        step: start.step,
        slot: start.slot,
        clock: start.clock,
        stop: start.stop,
        cancel: start.cancel,
        slots: None,
        sent: start.sent,
    };
    session.run().await;
}

/// A branch running: its last answer and that answer's tokens, or `None`
/// when it was cut.
type BranchRun<'a> = Pin<Box<dyn Future<Output = Option<(Arc<str>, u32)>> + Send + 'a>>;

/// A branch's history: the messages sent so far and their tokens. Each
/// message's text is shared (`Arc<str>`) with the pool, the answer it came
/// from, every later turn's request and its sub-agents' histories: a turn
/// copies pointers, never the text of its history.
#[derive(Clone, Default)]
struct History {
    messages: Vec<ChatMessage>,
    tokens: u32,
}

/// The roles a history holds, each one allocation for the whole run.
struct Roles {
    system: Arc<str>,
    user: Arc<str>,
    assistant: Arc<str>,
}

static ROLES: std::sync::LazyLock<Roles> = std::sync::LazyLock::new(|| Roles {
    system: "system".into(),
    user: "user".into(),
    assistant: "assistant".into(),
});

impl History {
    fn push(&mut self, role: &Arc<str>, content: &Arc<str>, tokens: u32) {
        self.messages
            .push(ChatMessage::new(role.clone(), content.clone()));
        self.tokens = self.tokens.saturating_add(tokens);
    }
}

/// Where a turn sits in its session's tree: its node number (pre-order:
/// a turn, then its sub-agents' nodes, then the next turn) and the
/// requests answered before it on its path from the session's start.
#[derive(Clone, Copy)]
struct Place {
    node: u64,
    depth: u64,
}

/// What one session adds up while it runs (its branches run at once).
#[derive(Default)]
struct Figures {
    first_sent_us: AtomicU64,
    tool_us: AtomicU64,
    server_us: AtomicU64,
    requests: AtomicU64,
}

/// One session's settings while it runs.
struct Run {
    id: u64,
    think: Duration,
    headers: Headers,
    turn_slots: Option<Arc<Semaphore>>,
    spread: bool,
    sticky: usize,
    figures: Figures,
}

/// One conversation in progress.
struct Session {
    /// Its pool entry, codec and scope (its workload's in a mixed run).
    choice: Choice,
    /// Its workload's session settings.
    settings: ConversationSettings,
    step: Arc<Step>,
    slot: Slot,
    clock: Clock,
    stop: CancellationToken,
    cancel: CancellationToken,
    slots: Option<Arc<Semaphore>>,
    sent: Arc<AtomicU64>,
}

impl Session {
    async fn run(self) {
        let pool_id = self.choice.pool_id;
        let Some(entry) = self.step.pool.get(&pool_id) else {
            tracing::error!(pool_id, "plan lacks a conversation its stripe uses");
            return;
        };
        let Some(conv) = &entry.conversation else {
            tracing::error!(pool_id, "pool entry is not a conversation");
            return;
        };
        self.turns(entry.id, conv).await;
    }

    async fn turns(&self, id: u64, conv: &Conversation) {
        let settings = &self.settings;
        let headers = self.session_headers(settings.session_header.as_deref());
        // the concurrency unit of synthetic sessions is the session: it holds
        // its slot from its first turn to its end
        let _session_permit = match (&self.slots, settings.session_slots) {
            (Some(sem), true) => tokio::select! {
                p = sem.clone().acquire_owned() => match p {
                    Ok(p) => Some(p),
                    Err(_) => return,
                },
                () = self.stop.cancelled() => return,
            },
            _ => None,
        };
        let run = Run {
            id,
            think: Duration::from_millis(settings.think_time_ms),
            headers,
            turn_slots: self.slots.clone().filter(|_| !settings.session_slots),
            spread: settings.spread_turns,
            // a conversation stays on one replica, so its growing prefix can
            // be cached there (unless the scenario spreads its turns)
            sticky: self.replica(0),
            figures: Figures::default(),
        };
        let history = History {
            messages: conv
                .system
                .iter()
                .map(|s| ChatMessage::new(ROLES.system.clone(), s.clone()))
                .collect(),
            tokens: conv.system_tokens,
        };
        let due_us = self.slot.offset.as_micros() as u64;
        let end = self
            .branch(
                &run,
                history,
                &conv.turns,
                Place { node: 0, depth: 0 },
                due_us,
            )
            .await;
        if end.is_some() {
            let f = &run.figures;
            let start = f.first_sent_us.load(Ordering::Relaxed);
            let end = SessionEnd {
                duration_us: self.clock.now_us().saturating_sub(start),
                tool_us: f.tool_us.load(Ordering::Relaxed),
                server_us: f.server_us.load(Ordering::Relaxed),
                requests: f.requests.load(Ordering::Relaxed),
            };
            self.step
                .recorder
                .record_session_end(self.scope(run.sticky), end);
        }
    }

    /// Run one branch of the session (the main agent's, or a sub-agent's)
    /// from `history`: its turns one after another, each turn's sub-agents
    /// in parallel after its answer. Returns the branch's last answer and
    /// its tokens, or `None` when a turn failed or the run stopped (the
    /// session is then cut).
    fn branch<'a>(
        &'a self,
        run: &'a Run,
        mut history: History,
        turns: &'a [Turn],
        mut at: Place,
        mut due_us: u64,
    ) -> BranchRun<'a> {
        Box::pin(async move {
            let mut last = None;
            for (k, turn) in turns.iter().enumerate() {
                if let Some(ms) = turn.tool_ms {
                    // a tool runs: no request, then its result joins the history
                    let began = self.clock.now_us();
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(ms)) => {}
                        () = self.stop.cancelled() => return None,
                    }
                    run.figures
                        .tool_us
                        .fetch_add(self.clock.now_us().saturating_sub(began), Ordering::Relaxed);
                    history.push(&ROLES.user, &turn.user, turn.input_tokens);
                } else {
                    let answer = self.request(run, &mut history, turn, at, due_us).await?;
                    at.depth += 1;
                    last = Some(answer);
                }
                if !turn.forks.is_empty() {
                    let mut node = at.node + 1;
                    let children = turn.forks.iter().map(|b| {
                        let place = Place {
                            node,
                            depth: at.depth,
                        };
                        node += b.nodes();
                        let from = if b.fresh {
                            History::default()
                        } else {
                            history.clone()
                        };
                        self.branch(run, from, &b.turns, place, self.clock.now_us())
                    });
                    // every sub-agent's last answer joins the history, in order
                    for answer in futures::future::join_all(children).await {
                        let (text, tokens) = answer?;
                        history.push(&ROLES.user, &text, tokens);
                    }
                }
                at.node += turn.nodes();
                let pause = turns
                    .get(k + 1)
                    .and_then(|t| t.think_ms)
                    .map_or(run.think, Duration::from_millis);
                due_us = self.clock.now_us() + pause.as_micros() as u64;
            }
            last
        })
    }

    /// Send one turn at `due_us` with `history`, record it and add the
    /// turn and its answer to the history; `None` when it failed or the
    /// run stopped.
    async fn request(
        &self,
        run: &Run,
        history: &mut History,
        turn: &Turn,
        at: Place,
        due_us: u64,
    ) -> Option<(Arc<str>, u32)> {
        let plan = &self.step.plan;
        let due = self.clock.start() + Duration::from_micros(due_us);
        tokio::select! {
            () = tokio::time::sleep_until(due) => {}
            () = self.stop.cancelled() => return None,
        }
        if let Some(d) = plan.duration()
            && self.clock.now_us() >= d.as_micros() as u64
        {
            return None;
        }
        let target = if run.spread {
            self.replica(at.node)
        } else {
            run.sticky
        };
        let permit = match &run.turn_slots {
            Some(sem) => tokio::select! {
                p = sem.clone().acquire_owned() => Some(p.ok()?),
                () = self.stop.cancelled() => return None,
            },
            None => None,
        };
        history.push(&ROLES.user, &turn.user, turn.input_tokens);
        let request = Entry {
            id: run.id,
            ask: Ask {
                prompt: Prompt::Chat(history.messages.clone()),
                media: Default::default(),
                output_tokens: turn.output_tokens,
                // conversations ask for text (the scenario refuses shapes)
                structured: None,
            },
            input_tokens: history.tokens,
            conversation: None,
            media: Default::default(),
        };
        let (record, answer) = self
            .send(&request, at.node, target, due_us, &run.headers)
            .await;
        drop(permit);
        self.sent.fetch_add(1, Ordering::Relaxed);
        let f = &run.figures;
        if at.node == 0 {
            f.first_sent_us.store(record.sent_us, Ordering::Relaxed);
        }
        f.requests.fetch_add(1, Ordering::Relaxed);
        f.server_us.fetch_add(
            record.ended_us.saturating_sub(record.sent_us),
            Ordering::Relaxed,
        );
        let turn_at = SessionTurn {
            first: at.node == 0,
            index: at.depth,
            node: at.node,
        };
        self.step
            .recorder
            .record_turn(self.scope(target), &record, turn_at);
        if !record.outcome.is_ok() {
            tracing::debug!(
                conversation = self.slot.index,
                node = at.node,
                "a turn failed; its conversation ends"
            );
            return None;
        }
        let output = u32::try_from(record.output_tokens).unwrap_or(u32::MAX);
        // the answer becomes shared text once; every later turn points at it
        let answer: Arc<str> = answer.into();
        history.push(&ROLES.assistant, &answer, output);
        Some((answer, output))
    }

    /// The scope of this session's requests on replica `target`.
    fn scope(&self, target: usize) -> Scope {
        let plan = &self.step.plan;
        Scope {
            target: target as u32,
            // a conversation stays on the model (or in the workload) of the
            // arrival that starts it
            model: self.choice.model,
            workload: self.choice.workload,
            stage: self.slot.stage,
            warmup: plan.is_warmup(self.slot.index, self.slot.offset),
        }
    }

    /// The replica of this session's turn `turn`: chosen from the session's
    /// index (plus the turn), so every worker count sends it to the same one.
    fn replica(&self, turn: u64) -> usize {
        let plan = &self.step.plan;
        route::pick(
            plan.target.routing,
            self.slot.index.wrapping_add(turn),
            plan.seed(),
            &self.step.in_flight_by_scope,
        )
        .min(plan.target.urls.len().saturating_sub(1))
    }

    /// The step's headers, with the one naming this session when the plan
    /// asks for it (its value: the run id and the session's global index,
    /// the same whatever the worker count).
    fn session_headers(&self, name: Option<&str>) -> Headers {
        let Some(name) = name else {
            return self.step.headers.clone();
        };
        let value = format!("{}-s{}", self.step.plan.run_id, self.slot.index);
        match self.step.headers.with(name, &value) {
            Ok(h) => h,
            Err(e) => {
                // the scenario checks the name; a run id is plain text
                tracing::warn!(%e, "the session header cannot be sent; the session goes without it");
                self.step.headers.clone()
            }
        }
    }

    /// Send one turn and record it; returns the record and the answer's text.
    async fn send(
        &self,
        request: &Entry,
        turn: u64,
        target: usize,
        scheduled_us: u64,
        headers: &Headers,
    ) -> (RequestRecord<EventLog>, String) {
        let step = &self.step;
        let plan = &step.plan;
        let id = format!(
            "cicada-{}-c{}-t{turn}-w{}",
            plan.run_id, self.slot.index, plan.worker_index
        );
        let model = self.choice.codec;
        let codec = step.codec(model);
        // the history's texts go on the wire from where the history holds them
        let body = codec.shared_body(&request.ask);
        step.in_flight.fetch_add(1, Ordering::Relaxed);
        let sent_us = self.clock.now_us();
        let warmup = plan.is_warmup(self.slot.index, self.slot.offset);
        let tracker = step.in_flight_by_scope.get(target, model);
        tracker.change(sent_us, true, warmup);
        let conduit = Conduit {
            http: &step.http,
            headers,
            codec,
            clock: &self.clock,
            timeout: step.timeout,
            keep_text: true,
            keep_output: false,
        };
        let exchange = exchange(
            conduit,
            (step.endpoint(model, target), &id, body.parts()),
            &self.cancel,
            self.slot.index,
            sent_us,
        )
        .await;
        tracker.change(exchange.ended_us, false, warmup);
        step.in_flight.fetch_sub(1, Ordering::Relaxed);
        let verify_every = u64::from(plan.verify_every);
        let counting = Counting {
            tokenizer: step.tokenizer.as_ref(),
            verify: verify_every > 0 && (self.slot.index + turn).is_multiple_of(verify_every),
        };
        let at = Placement {
            index: self.slot.index,
            target: target as u32,
            scheduled_us,
            sent_us: exchange.sent_us,
        };
        let record = guarded_record(&exchange, request, at, codec.streams(), counting);
        (record, exchange.text.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use cicada_mock::{MockConfig, MockServer, fingerprint};
    use cicada_plan::units::Span;
    use cicada_plan::{ResolvedTarget, Routing, ServerFamily, TlsSettings, WireApi};
    use cicada_scenarios::Scenario;
    use cicada_scenarios::dataset::build_pool;
    use cicada_scenarios::scenario::{ConversationsSpec, Dataset};
    use cicada_scenarios::sharding::plans_for;

    use super::*;

    /// A history copies pointers, never texts: a turn's user message, the
    /// history a sub-agent starts from and the prompt a turn sends all point
    /// at the pool's text and the answer's one copy.
    #[test]
    fn a_history_shares_its_texts() {
        let user: Arc<str> = "a long first turn".into();
        let answer: Arc<str> = "an answer".into();
        let mut h = History::default();
        h.push(&ROLES.user, &user, 4);
        h.push(&ROLES.assistant, &answer, 2);
        let fork = h.clone();
        let Prompt::Chat(sent) = Prompt::Chat(fork.messages.clone()) else {
            unreachable!()
        };
        assert!(Arc::ptr_eq(&sent[0].content, &user));
        assert!(Arc::ptr_eq(&sent[1].content, &answer));
        assert!(Arc::ptr_eq(&sent[1].role, &ROLES.assistant));
        assert_eq!(fork.tokens, 6);
    }

    #[tokio::test]
    async fn turns_go_in_order_with_the_previous_answers() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mock = MockServer::start(
            MockConfig {
                ttft_ms: 2.0,
                itl_ms: 1.0,
                ..MockConfig::default()
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
        let dir = std::env::temp_dir().join(format!("cicada-conv-exec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.jsonl");
        std::fs::write(
            &path,
            "{\"messages\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"u0 a\"}, {\"role\": \"assistant\", \"content\": \"x y z\"}, {\"role\": \"user\", \"content\": \"u0 b\"}, {\"role\": \"user\", \"content\": \"more\"}, {\"role\": \"assistant\", \"content\": \"k\"}, {\"role\": \"user\", \"content\": \"u0 c\"}]}\n\
             {\"conversations\": [{\"from\": \"human\", \"value\": \"u1 a\"}, {\"from\": \"gpt\", \"value\": \"p q\"}, {\"from\": \"human\", \"value\": \"u1 b\"}]}\n",
        )
        .unwrap();
        let mut s = Scenario {
            dataset: Dataset::Conversations(ConversationsSpec {
                path,
                output_len: None,
                shuffle: false,
                think_time: Span::millis(30),
                max_turns: None,
            }),
            ..Scenario::default()
        };
        s.load.num_prompts = Some(2);
        let pool = build_pool(&s, None).unwrap();
        let target = ResolvedTarget {
            api: WireApi::Chat,
            family: ServerFamily::Mock,
            urls: vec![format!("{}/v1/chat/completions", mock.url())],
            model: "m".into(),
            models: Vec::new(),
            model_assignment: Default::default(),
            headers: BTreeMap::new(),
            api_key_env: None,
            timeout_ms: 5000,
            stream: true,
            routing: Routing::default(),
            tls: TlsSettings::default(),
            keep_alive: true,
            http: cicada_plan::HttpVersion::Auto,
            addresses: cicada_plan::AddressChoice::First,
            proxy: cicada_plan::ProxySetting::Env,
            no_proxy: Vec::new(),
            max_event_bytes: 16 << 20,
        };
        let plan = plans_for(&s, &target, &pool, None, "run1", 0, 1).remove(0);
        assert_eq!(plan.planned_requests(), 5);
        let step = Arc::new(Step::new(plan, 2, None).unwrap());
        let clock = Clock::new(tokio::time::Instant::now());
        let sent = run_conversations(
            step.clone(),
            clock,
            CancellationToken::new(),
            CancellationToken::new(),
        )
        .await;
        assert_eq!(sent, 5);
        std::fs::remove_dir_all(&dir).unwrap();

        let log = mock.requests();
        assert_eq!(log.len(), 5);
        for conv in 0..2u64 {
            let turns: Vec<_> = log
                .iter()
                .filter(|r| {
                    r.request_id
                        .as_deref()
                        .is_some_and(|id| id.contains(&format!("-c{conv}-")))
                })
                .collect();
            let users = if conv == 0 {
                vec!["u0 a", "u0 b\nmore", "u0 c"]
            } else {
                vec!["u1 a", "u1 b"]
            };
            assert_eq!(turns.len(), users.len());
            let mut expect: Vec<(String, u64)> = Vec::new();
            if conv == 0 {
                expect.push(("system".into(), fingerprint("sys")));
            }
            for (k, r) in turns.iter().enumerate() {
                assert!(
                    r.request_id
                        .as_deref()
                        .unwrap()
                        .ends_with(&format!("-t{k}-w0"))
                );
                expect.push(("user".into(), fingerprint(users[k])));
                let got: Vec<(String, u64)> = r
                    .messages
                    .iter()
                    .map(|m| (m.role.clone(), m.fingerprint))
                    .collect();
                assert_eq!(got, expect, "conversation {conv} turn {k}");
                expect.push(("assistant".into(), r.output_fingerprint));
                if k > 0 {
                    // the next turn waited for the answer and the think time
                    assert!(r.offset_us >= turns[k - 1].offset_us + 30_000);
                }
            }
        }
        // the dataset's answers set each turn's length; the unanswered last turn asks for none
        let asked: Vec<Option<u32>> = log
            .iter()
            .filter(|r| {
                r.request_id
                    .as_deref()
                    .is_some_and(|id| id.contains("-c0-"))
            })
            .map(|r| r.max_tokens)
            .collect();
        assert_eq!(asked, [Some(3), Some(1), None]);
        let sets = step.take_interval(clock.now_us());
        let served: u64 = log.iter().map(|r| u64::from(r.output_tokens)).sum();
        assert_eq!(
            sets[0].1.counter(cicada_metrics::Counter::OutputTokens),
            served
        );
        let prompts: u64 = log.iter().map(|r| u64::from(r.prompt_tokens)).sum();
        assert_eq!(
            sets[0].1.counter(cicada_metrics::Counter::InputTokens),
            prompts
        );
    }
}
