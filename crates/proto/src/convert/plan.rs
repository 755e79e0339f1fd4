//! Wire <-> domain conversion for the plan (`cicada_plan::Plan` <->
//! `v1::Plan`). The pool travels as a deflated `v1::Pool`, in pieces after
//! the plan: it is most of a plan's bytes and is text (see
//! `proto/plan.proto`, and `chunks`).

mod chunks;
mod drive;
mod pool;
mod target;

use std::time::Duration;

use cicada_plan::shape::{Cooldown, Warmup};
use cicada_plan::units::Span;
use cicada_plan::{ConversationSettings, Plan, StageWindow, WorkloadPart};

use crate::v1;
pub use chunks::{DeflatedPool, POOL_CHUNK_BYTES, PoolReceiver, ReceivedPool};
use drive::{drive, drive_from};
use pool::pool_from;
use target::{sampling, sampling_from, slo, slo_from, target, target_from};

/// Version of the plan's meaning, sent in `Assign.plan_format`; bumped when
/// a field changes meaning, so a worker never runs a plan it would read
/// otherwise (3: the plan became typed protobuf; 4: the target's HTTP
/// version, address choice and proxy, which an older worker would ignore;
/// 5: the Responses, Messages and transcription APIs, output shapes, images
/// and audio, and the `ttfa_ms` bound; 7: a model's llama-server LoRA id, the rerank
/// prompt (a query and documents), the rerank and TEI APIs and vLLM's
/// pooling and score APIs; 8: mixed traffic's workloads, agent sessions'
/// forks and tool waits, and prompts of token ids, which an older worker
/// would ignore or send as empty text; 9: session workloads in a mix, which
/// an older worker would send as single requests; 10: the pool travels in
/// `PoolChunk` messages after the plan, which an older worker would not
/// read).
pub const PLAN_FORMAT: u32 = 10;

/// Why a plan from the wire could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("plan format {found} is not supported by this worker (it reads format {PLAN_FORMAT})")]
    Format { found: u32 },
    #[error("the plan lacks {0}")]
    Missing(&'static str),
    #[error("the plan's {field} is {value}, which this worker does not know")]
    Unknown { field: &'static str, value: i32 },
    #[error("the plan's pool is corrupt: {0}")]
    Pool(String),
    #[error("the plan's pool was cut short: {got} of its {of} pieces arrived")]
    Truncated { got: u32, of: u32 },
    #[error("piece {seq} of the plan's pool ({of} pieces) is bad: {why}")]
    Chunk { seq: u32, of: u32, why: String },
    #[error("the plan's sampling.extra_body.{key} is not JSON: {error}")]
    ExtraBody { key: String, error: String },
    #[error("the plan's tools / response format: {0}")]
    Shape(String),
}

/// The plan as it goes on the wire (`Assign.plan`), without its pool, which
/// follows it ([`DeflatedPool`]: deflated once for every worker that gets
/// the same one).
pub fn encode_plan(plan: &Plan) -> v1::Plan {
    let (warmup_requests, warmup_span) = match plan.warmup {
        Some(Warmup::Requests(n)) => (Some(n), None),
        Some(Warmup::Duration(d)) => (None, Some(span(d.get()))),
        None => (None, None),
    };
    v1::Plan {
        run_id: plan.run_id.clone(),
        step: plan.step,
        worker_index: plan.worker_index,
        worker_count: plan.worker_count,
        target: Some(target(&plan.target)),
        sampling: Some(sampling(&plan.sampling)),
        slo: Some(slo(&plan.slo)),
        drive: Some(drive(&plan.drive)),
        stages: plan
            .stages
            .iter()
            .map(|w| v1::StageWindow {
                name: w.name.clone(),
                start: Some(span(w.start)),
                end: Some(span(w.end)),
            })
            .collect(),
        warmup: warmup_requests
            .map(v1::plan::Warmup::WarmupRequests)
            .or(warmup_span.map(v1::plan::Warmup::WarmupSpan)),
        cooldown_cancel: plan.cooldown == Cooldown::Cancel,
        report_interval_ms: plan.report_interval_ms,
        tokenizer: plan.tokenizer.clone(),
        verify_every: plan.verify_every,
        conversation_think_time_ms: plan.conversations.as_ref().map(|c| c.think_time_ms),
        details: plan.details,
        conversation_session_slots: plan.conversations.as_ref().is_some_and(|c| c.session_slots),
        conversation_session_header: plan
            .conversations
            .as_ref()
            .and_then(|c| c.session_header.clone()),
        conversation_spread_turns: plan.conversations.as_ref().is_some_and(|c| c.spread_turns),
        workloads: plan.workloads.iter().map(workload).collect(),
    }
}

fn workload(w: &WorkloadPart) -> v1::Workload {
    v1::Workload {
        name: w.name.clone(),
        weight: w.weight,
        target: Some(target(&w.target)),
        sampling: Some(sampling(&w.sampling)),
        slo: Some(slo(&w.slo)),
        pool_start: w.pool_start,
        pool_len: w.pool_len,
        session_think_time_ms: w.sessions.as_ref().map(|c| c.think_time_ms),
        session_slots: w.sessions.as_ref().is_some_and(|c| c.session_slots),
        session_header: w.sessions.as_ref().and_then(|c| c.session_header.clone()),
        session_spread_turns: w.sessions.as_ref().is_some_and(|c| c.spread_turns),
    }
}

fn workload_from(w: v1::Workload) -> Result<WorkloadPart, PlanError> {
    Ok(WorkloadPart {
        name: w.name,
        weight: w.weight,
        target: target_from(w.target.ok_or(PlanError::Missing("workloads.target"))?)?,
        sampling: sampling_from(w.sampling.ok_or(PlanError::Missing("workloads.sampling"))?)?,
        slo: slo_from(w.slo.unwrap_or_default()),
        pool_start: w.pool_start,
        pool_len: w.pool_len,
        sessions: w
            .session_think_time_ms
            .map(|think_time_ms| ConversationSettings {
                think_time_ms,
                session_slots: w.session_slots,
                session_header: w.session_header,
                spread_turns: w.session_spread_turns,
            }),
    })
}

/// Whether a worker of this build reads plans of `format` (`Assign.plan_format`).
pub fn check_format(format: u32) -> Result<(), PlanError> {
    if format == PLAN_FORMAT {
        Ok(())
    } else {
        Err(PlanError::Format { found: format })
    }
}

/// The plan a worker runs, from `Assign.plan`, `Assign.plan_format` and the
/// pool that followed it.
pub fn decode_plan(wire: v1::Plan, format: u32, pool: ReceivedPool) -> Result<Plan, PlanError> {
    check_format(format)?;
    let pool = pool.0;
    Ok(Plan {
        run_id: wire.run_id,
        step: wire.step,
        worker_index: wire.worker_index,
        worker_count: wire.worker_count,
        target: target_from(wire.target.ok_or(PlanError::Missing("target"))?)?,
        sampling: sampling_from(wire.sampling.ok_or(PlanError::Missing("sampling"))?)?,
        slo: slo_from(wire.slo.unwrap_or_default()),
        drive: drive_from(wire.drive.ok_or(PlanError::Missing("drive"))?)?,
        stages: wire
            .stages
            .into_iter()
            .map(|w| {
                Ok(StageWindow {
                    name: w.name,
                    start: duration(w.start, "stages.start")?,
                    end: duration(w.end, "stages.end")?,
                })
            })
            .collect::<Result<_, PlanError>>()?,
        warmup: match wire.warmup {
            Some(v1::plan::Warmup::WarmupRequests(n)) => Some(Warmup::Requests(n)),
            Some(v1::plan::Warmup::WarmupSpan(s)) => Some(Warmup::Duration(Span(from_span(s)))),
            None => None,
        },
        cooldown: if wire.cooldown_cancel {
            Cooldown::Cancel
        } else {
            Cooldown::Finish
        },
        shapes: pool
            .shapes
            .iter()
            .cloned()
            .map(super::shape::shape_from)
            .collect::<Result<_, _>>()
            .map_err(|e| PlanError::Shape(e.0))?,
        pool: pool_from(pool)?,
        report_interval_ms: wire.report_interval_ms,
        tokenizer: wire.tokenizer,
        verify_every: wire.verify_every,
        conversations: wire
            .conversation_think_time_ms
            .map(|think_time_ms| ConversationSettings {
                think_time_ms,
                session_slots: wire.conversation_session_slots,
                session_header: wire.conversation_session_header,
                spread_turns: wire.conversation_spread_turns,
            }),
        details: wire.details,
        workloads: wire
            .workloads
            .into_iter()
            .map(workload_from)
            .collect::<Result<_, _>>()?,
    })
}

fn span(d: Duration) -> v1::Span {
    v1::Span {
        secs: d.as_secs(),
        nanos: d.subsec_nanos(),
    }
}

fn from_span(s: v1::Span) -> Duration {
    Duration::new(s.secs, s.nanos.min(999_999_999))
}

fn duration(s: Option<v1::Span>, field: &'static str) -> Result<Duration, PlanError> {
    s.map(from_span).ok_or(PlanError::Missing(field))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::io::{Read as _, Write as _};
    use std::sync::Arc;

    use cicada_plan::pool::{ChatMessage, Conversation, MediaFile, Prompt, Turn};
    use cicada_plan::{
        AddressChoice, Drive, HttpVersion, ModelAssignment, ProxySetting, ResolvedTarget, Routing,
        ServerFamily, TlsSettings, WeightedModel, WireApi,
    };
    use cicada_scenarios::Scenario;
    use prost::Message as _;

    use super::chunks::crc32;
    use super::*;
    use cicada_scenarios::dataset::build_pool;
    use cicada_scenarios::sharding::plans_for;

    fn target() -> ResolvedTarget {
        ResolvedTarget {
            api: WireApi::Chat,
            family: ServerFamily::Vllm,
            urls: vec!["http://a/v1/chat/completions".into(), "http://b/x".into()],
            model: "m".into(),
            models: vec![
                WeightedModel {
                    name: "m".into(),
                    weight: 3.0,
                    lora_id: None,
                },
                WeightedModel {
                    name: "lora-b".into(),
                    weight: 1.0,
                    lora_id: Some(2),
                },
            ],
            model_assignment: ModelAssignment::RoundRobin,
            headers: BTreeMap::from([("x-team".to_string(), "bench".to_string())]),
            api_key_env: Some("KEY".into()),
            timeout_ms: 1234,
            stream: false,
            routing: Routing::LeastInFlight,
            tls: TlsSettings {
                ca_pem: Some("-----BEGIN CERTIFICATE-----".into()),
                insecure: true,
            },
            keep_alive: false,
            max_event_bytes: 99,
            http: HttpVersion::Http2,
            addresses: AddressChoice::Spread,
            proxy: ProxySetting::Url("http://u:p@proxy:3128".into()),
            no_proxy: vec!["localhost".into(), ".internal".into()],
        }
    }

    /// `pool`'s messages as a worker reads them off the wire, pushed into
    /// a receiver in order: the pool, or the first refusal.
    fn receive(
        step: u32,
        chunks: u32,
        bytes: u64,
        messages: impl IntoIterator<Item = v1::PoolChunk>,
    ) -> Result<ReceivedPool, PlanError> {
        let mut r = PoolReceiver::start(step, chunks, bytes)?;
        for m in messages {
            let wire = v1::PoolChunk::decode(m.encode_to_vec().as_slice()).unwrap();
            r.push(wire)?;
        }
        r.finish()
    }

    /// A pool deflated in pieces of at most `max` bytes, read back.
    fn through(pool: &DeflatedPool) -> ReceivedPool {
        receive(7, pool.chunks(), pool.bytes(), pool.messages(7)).unwrap()
    }

    /// `p`'s pool in pieces of at most `max` bytes.
    fn deflated(p: &Plan, max: usize) -> DeflatedPool {
        DeflatedPool::cut(pool::deflate_pool(&p.pool, &p.shapes), max)
    }

    fn round_trip(p: &Plan) -> Plan {
        let bytes = encode_plan(p).encode_to_vec();
        let pool = through(&DeflatedPool::new(&p.pool, &p.shapes));
        decode_plan(
            v1::Plan::decode(bytes.as_slice()).unwrap(),
            PLAN_FORMAT,
            pool,
        )
        .unwrap()
    }

    fn scenario(text: &str) -> Scenario {
        cicada_scenarios::parse(text, "t.toml", &[]).unwrap()
    }

    /// Every kind of plan the scenarios make comes back from the wire equal,
    /// field for field.
    #[test]
    fn plans_come_back_from_the_wire_unchanged() {
        let cases = [
            // open loop: rate, stages of rates, warm-up by count, a fleet cap
            "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"random\"\ninput_len = 8\n[load]\nnum_prompts = 40\nrequest_rate = 7.5\nburstiness = 0.5\nmax_concurrency = 3\nwarmup = { requests = 4 }\n[sampling]\ntemperature = 0.25\ntop_k = -1\nmin_tokens = 2\nextra_body = { a = [1, \"x\", { b = true }] }\n[slo]\nttft_ms = 5\nmin_attainment = 0.5\n",
            // a ramp, time-bound, cancel at the end
            "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"random\"\ninput_len = 8\n[load]\nduration = \"3s\"\ncooldown = \"cancel\"\n[load.ramp]\nstrategy = \"exponential\"\nstart_rps = 1\nend_rps = 8\n",
            // closed loop with stages, spawn rates, think time, warm-up by time
            "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"random\"\ninput_len = 4\n[load]\nthink_time = { uniform = [\"5ms\", \"9ms\"] }\nwarmup = \"1s\"\n[[stages]]\nduration = \"5s\"\nusers = 2\n[[stages]]\nname = \"peak\"\nduration = \"5s\"\nusers = 8\nspawn_rate = 4\n",
            // unbounded rate, open-loop stages
            "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"random\"\ninput_len = 4\n[[stages]]\nduration = \"2s\"\nrequest_rate = 3\n[[stages]]\nduration = \"2s\"\nrequest_rate = 12.5\nburstiness = 2\n",
            // mixed traffic: each workload's target, sampling, SLO and pool ids
            "[target]\nbackend = \"mock\"\n[load]\nnum_prompts = 12\n[[workloads]]\nname = \"a\"\nweight = 2.5\n[workloads.slo]\nttft_ms = 9\n[[workloads]]\nname = \"b\"\n[workloads.target]\nbackend = \"openai\"\nmodel = \"m2\"\n[workloads.sampling]\ntemperature = 0.5\n[workloads.dataset]\ninput_len = 3\n",
            // a mix with a session workload: its session settings
            "[target]\nbackend = \"mock\"\nsession_header = \"x-s\"\nsticky_sessions = false\n[load]\nnum_prompts = 12\n[[workloads]]\nname = \"a\"\n[[workloads]]\nname = \"b\"\n[workloads.dataset]\nkind = \"multi_turn\"\nturns = 2\ninput_len = 3\nthink_time = \"7ms\"\n",
        ];
        for text in cases {
            let s = scenario(text);
            let pool = build_pool(&s, None).unwrap();
            for workers in [1u32, 3] {
                for mut p in plans_for(&s, &target(), &pool, None, "run", 2, workers) {
                    p.tokenizer = Some("{\"model\": {}}".into());
                    p.verify_every = 5;
                    p.details = true;
                    let mixed = text.contains("[[workloads]]");
                    assert_eq!(p.workloads.len(), if mixed { 2 } else { 0 });
                    if text.contains("multi_turn") {
                        let own = p.workloads[1].sessions.as_ref().unwrap();
                        assert_eq!(
                            (own.think_time_ms, own.session_header.as_deref()),
                            (7, Some("x-s"))
                        );
                        assert!(own.spread_turns && p.workloads[0].sessions.is_none());
                    }
                    assert_eq!(round_trip(&p), p, "{text}");
                }
            }
        }
    }

    /// Chat prompts, pooling batches, reranks, token ids, conversations, trace arrivals and an empty text prompt.
    #[test]
    fn pools_of_every_shape_come_back_unchanged() {
        let s = scenario(
            "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"random\"\ninput_len = 4\n[load]\nnum_prompts = 5\n",
        );
        let pool = build_pool(&s, None).unwrap();
        let mut p = plans_for(&s, &target(), &pool, None, "r", 0, 1).remove(0);
        p.pool[0].prompt = Prompt::Chat(vec![ChatMessage::new("system", "be brief")]);
        p.pool[1].prompt = Prompt::Text("".into());
        p.pool[2].prompt = Prompt::Batch(vec!["a b".into(), String::new(), "c".into()]);
        p.pool[3].prompt = Prompt::Rerank {
            query: "q".into(),
            documents: vec!["d e".into(), String::new()],
        };
        p.pool[4].prompt = Prompt::Tokens(vec![0, 7, u32::MAX, 7]);
        p.pool[2].conversation = Some(Conversation {
            system: Some("sys".into()),
            system_tokens: 2,
            turns: vec![Turn {
                think_ms: Some(40),
                forks: vec![cicada_plan::pool::Branch {
                    turns: vec![
                        Turn::chat("sub", 1, Some(2)),
                        Turn {
                            tool_ms: Some(7),
                            ..Turn::chat("result", 1, None)
                        },
                    ],
                    fresh: true,
                }],
                ..Turn::chat("hi", 1, Some(3))
            }],
        });
        p.conversations = Some(ConversationSettings {
            think_time_ms: 250,
            session_slots: true,
            session_header: Some("x-session-id".into()),
            spread_turns: true,
        });
        // tools, every tool choice and response format, shared by index
        let tools = serde_json::json!([
            {"type": "function", "function": {"name": "f", "description": "d",
             "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}, "strict": true}},
            {"type": "function", "function": {"name": "g"}}]);
        let schema = serde_json::json!({"type": "json_schema",
            "json_schema": {"name": "n", "schema": {"enum": [1, "x"]}, "strict": false}});
        for (choice, format) in [
            (serde_json::json!("auto"), schema),
            (
                serde_json::json!("none"),
                serde_json::json!({"type": "json_object"}),
            ),
            (
                serde_json::json!("required"),
                serde_json::json!({"type": "text"}),
            ),
            (
                serde_json::json!({"type": "function", "function": {"name": "g"}}),
                serde_json::Value::Null,
            ),
        ] {
            let mut shape =
                cicada_request::OutputShape::read(Some(&tools), Some(&choice), Some(&format))
                    .unwrap();
            shape.check_only = p.shapes.len() == 1;
            p.shapes.push(shape);
        }
        p.pool[0].shape = Some(3);
        p.pool[2].shape = Some(0);
        if let Drive::Open { schedule, .. } = &mut p.drive {
            schedule.arrivals_us = Some(vec![0, 5, 1_000_000]);
            schedule.burstiness = f64::INFINITY;
        }
        assert_eq!(round_trip(&p), p);
    }

    /// Synthetic media travel as size and seed; a file sent by several
    /// entries travels once and comes back shared.
    #[test]
    fn media_come_back_and_files_travel_once() {
        use cicada_plan::pool::{Audio, Image};
        let s = scenario(
            "[target]\nbackend = \"mock\"\n[dataset]\ninput_len = 4\n[load]\nnum_prompts = 3\n",
        );
        let pool = build_pool(&s, None).unwrap();
        let mut p = plans_for(&s, &target(), &pool, None, "r", 0, 1).remove(0);
        let file = Arc::new(MediaFile {
            mime: "image/png".into(),
            name: "a.png".into(),
            bytes: vec![7u8; 50_000].into(),
        });
        p.pool[0].media.images = vec![
            Image::Synthetic {
                width: 640,
                height: 480,
                seed: 11,
            },
            Image::File(file.clone()),
        ];
        p.pool[1].media.images = vec![Image::File(file.clone())];
        p.pool[2].media.audio = Some(Audio::Synthetic {
            duration_ms: 1500,
            sample_rate: 16_000,
            seed: 4,
        });
        let pool = through(&DeflatedPool::new(&p.pool, &p.shapes));
        assert_eq!(pool.0.files.len(), 1, "the shared file travels once");
        let back = decode_plan(encode_plan(&p), PLAN_FORMAT, pool).unwrap();
        assert_eq!(back, p);
        let (Image::File(a), Image::File(b)) =
            (&back.pool[0].media.images[1], &back.pool[1].media.images[0])
        else {
            panic!("files came back as files");
        };
        assert!(Arc::ptr_eq(a, b), "entries share the decoded file");
    }

    /// Issue 39 item 3: a pool of many compression chunks (each deflated on
    /// its own, on several threads) comes back entry for entry, in order,
    /// with every kind of prompt and a file shared across chunks, and is
    /// the one deflate stream an ordinary inflate reads.
    #[test]
    fn a_pool_of_many_chunks_comes_back_in_order() {
        use cicada_plan::pool::Image;
        let s = scenario(
            "[target]\nbackend = \"mock\"\n[dataset]\ninput_len = 3000\nrange_ratio = 0.5\n[load]\nnum_prompts = 2500\n",
        );
        let pool = build_pool(&s, None).unwrap();
        let mut p = plans_for(&s, &target(), &pool, None, "r", 0, 1).remove(0);
        let file = Arc::new(MediaFile {
            mime: "image/png".into(),
            name: "a.png".into(),
            bytes: vec![3u8; 1000].into(),
        });
        for (i, e) in p.pool.iter_mut().enumerate() {
            match i % 97 {
                1 => e.prompt = Prompt::Tokens((0..4000).map(|k| k * 7 + i as u32).collect()),
                2 => {
                    e.prompt = Prompt::Chat(vec![ChatMessage {
                        role: "user".into(),
                        content: format!("chat {i}").into(),
                    }]);
                }
                3 => e.prompt = Prompt::Text("".into()),
                4 => e.media.images = vec![Image::File(file.clone())],
                _ => {}
            }
        }
        let raw = super::pool::pool(&p.pool, &p.shapes).encoded_len();
        assert!(
            raw > 5 * super::pool::CHUNK_BYTES,
            "{raw} bytes is several chunks"
        );
        let whole = DeflatedPool::new(&p.pool, &p.shapes);
        // the compressed chunks are one deflate stream, whatever the cut
        let mut one = Vec::new();
        flate2::read::DeflateDecoder::new(
            whole
                .messages(0)
                .flat_map(|m| m.data.to_vec())
                .collect::<Vec<u8>>()
                .as_slice(),
        )
        .read_to_end(&mut one)
        .unwrap();
        assert_eq!(one.len(), raw);
        let pool = through(&whole);
        assert_eq!(pool.0.files.len(), 1);
        assert_eq!(decode_plan(encode_plan(&p), PLAN_FORMAT, pool).unwrap(), p);
    }

    /// Issue 39 item 3: a pool sent in many pieces (cut small here, as a
    /// 3 GB pool is cut at [`POOL_CHUNK_BYTES`]) arrives byte for byte at
    /// one worker, and at each of two workers given the same pieces (the
    /// one compressed copy the coordinator sends every worker of the same
    /// share) or their own stripes.
    #[test]
    fn a_pool_in_many_pieces_arrives_whole_at_one_and_two_workers() {
        let s = scenario(
            "[target]\nbackend = \"mock\"\n[dataset]\ninput_len = 500\nrange_ratio = 0.5\n[load]\nnum_prompts = 300\n",
        );
        let pool = build_pool(&s, None).unwrap();
        for workers in [1u32, 2] {
            let plans = plans_for(&s, &target(), &pool, None, "r", 0, workers);
            // each its own share, and the first's shared by every worker
            let shared = deflated(&plans[0], 4096);
            assert!(shared.chunks() > 20, "{} pieces", shared.chunks());
            for p in &plans {
                let own = deflated(p, 4096);
                for sent in [&own, &shared] {
                    let got = receive(7, sent.chunks(), sent.bytes(), sent.messages(7)).unwrap();
                    let mut back = decode_plan(encode_plan(p), PLAN_FORMAT, got).unwrap();
                    let want = if std::ptr::eq(sent, &shared) {
                        &plans[0]
                    } else {
                        p
                    };
                    assert_eq!(back.pool.len(), want.pool.len());
                    for (b, w) in back.pool.iter().zip(&want.pool) {
                        assert_eq!(b.prompt.text().as_bytes(), w.prompt.text().as_bytes());
                    }
                    back.pool.clone_from(&p.pool);
                    assert_eq!(&back, p);
                }
            }
            if workers == 2 {
                assert_ne!(plans[0].pool, plans[1].pool, "two stripes");
            }
        }
    }

    /// A pool cut short, reordered, damaged or padded is refused with what
    /// went wrong, never read as a shorter pool.
    #[test]
    fn a_pool_cut_short_or_damaged_is_refused_with_what_went_wrong() {
        let s = scenario(
            "[target]\nbackend = \"mock\"\n[dataset]\ninput_len = 200\n[load]\nnum_prompts = 50\n",
        );
        let pool = build_pool(&s, None).unwrap();
        let p = plans_for(&s, &target(), &pool, None, "r", 0, 1).remove(0);
        let sent = deflated(&p, 1000);
        let (n, bytes) = (sent.chunks(), sent.bytes());
        assert!(n > 4);
        let all: Vec<v1::PoolChunk> = sent.messages(3).collect();
        let err = |m: Vec<v1::PoolChunk>, n: u32, bytes: u64| receive(3, n, bytes, m).unwrap_err();
        // the last piece never came
        let e = err(all[..all.len() - 1].to_vec(), n, bytes);
        assert!(
            matches!(e, PlanError::Truncated { got, of } if got == n - 1 && of == n),
            "{e}"
        );
        assert!(e.to_string().contains("cut short"), "{e}");
        // a piece missing in the middle
        let mut gap = all.clone();
        gap.remove(2);
        let e = err(gap, n, bytes);
        assert!(matches!(e, PlanError::Chunk { seq: 3, .. }), "{e}");
        assert!(e.to_string().contains("where piece 2 was due"), "{e}");
        // a damaged byte
        let mut damaged = all.clone();
        let mut data = damaged[1].data.to_vec();
        data[10] ^= 0x40;
        damaged[1].data = data.into();
        let e = err(damaged.clone(), n, bytes);
        assert!(matches!(e, PlanError::Chunk { seq: 1, .. }), "{e}");
        assert!(e.to_string().contains("CRC-32"), "{e}");
        // damaged before its CRC was taken: the stream itself is bad
        damaged[1].crc32 = crc32(&damaged[1].data);
        let e = err(damaged, n, bytes);
        assert!(
            matches!(e, PlanError::Pool(_) | PlanError::Chunk { .. }),
            "{e}"
        );
        // the stream's end cut off, the sizes made to agree
        let mut short = all.clone();
        let last = short.last_mut().unwrap();
        let cut = last.data.slice(..last.data.len() - 3);
        last.crc32 = crc32(&cut);
        last.data = cut;
        let e = err(short, n, bytes - 3);
        assert!(e.to_string().contains("stops before its end"), "{e}");
        // bytes after the stream's end
        let mut padded = all.clone();
        padded.push(v1::PoolChunk {
            step: 3,
            seq: n,
            data: vec![1, 2, 3].into(),
            crc32: crc32(&[1, 2, 3]),
        });
        let e = err(padded, n + 1, bytes + 3);
        assert!(e.to_string().contains("follow the end"), "{e}");
        // another step's piece, and more bytes than announced
        let mut other = all.clone();
        other[0].step = 4;
        assert!(
            err(other, n, bytes)
                .to_string()
                .contains("belongs to step 4")
        );
        assert!(
            err(all.clone(), n, bytes - 1)
                .to_string()
                .contains("announced")
        );
        // and the pieces as sent come through
        assert!(receive(3, n, bytes, all).is_ok());
    }

    #[test]
    fn a_plan_of_another_format_or_a_corrupt_pool_is_refused() {
        let s = scenario("[target]\nbackend = \"mock\"\n[load]\nnum_prompts = 2\n");
        let pool = build_pool(&s, None).unwrap();
        let p = plans_for(&s, &target(), &pool, None, "r", 0, 1).remove(0);
        let sent = DeflatedPool::new(&p.pool, &p.shapes);
        let err = decode_plan(encode_plan(&p), PLAN_FORMAT + 1, through(&sent)).unwrap_err();
        let found = format!("plan format {}", PLAN_FORMAT + 1);
        assert!(err.to_string().contains(&found), "{err}");
        assert!(check_format(PLAN_FORMAT + 1).is_err() && check_format(PLAN_FORMAT).is_ok());
        let junk = v1::PoolChunk {
            step: 0,
            seq: 0,
            data: b"junk".to_vec().into(),
            crc32: crc32(b"junk"),
        };
        assert!(matches!(receive(0, 1, 4, [junk]), Err(PlanError::Pool(_))));
        assert!(matches!(
            PoolReceiver::start(0, 0, 0),
            Err(PlanError::Missing(_))
        ));
        let mut wire = encode_plan(&p);
        wire.target.as_mut().unwrap().api = 77;
        assert!(matches!(
            decode_plan(wire, PLAN_FORMAT, through(&sent)),
            Err(PlanError::Unknown { value: 77, .. })
        ));
        let mut wire = encode_plan(&p);
        wire.drive = None;
        assert!(matches!(
            decode_plan(wire, PLAN_FORMAT, through(&sent)),
            Err(PlanError::Missing("drive"))
        ));
    }

    /// What a big plan costs on the wire: 10,000 random prompts of about
    /// 1,000 words. Run with
    /// `cargo test --release -p cicada-proto plan_size -- --ignored --nocapture`;
    /// it prints the typed plan's size and times beside the deflated JSON
    /// the plan travelled as before.
    #[test]
    #[ignore = "a measurement: prints figures, run by hand"]
    fn plan_size_and_time_of_a_big_pool() {
        use std::time::Instant;
        let s = scenario(
            "[target]\nbackend = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\n[dataset]\nkind = \"random\"\ninput_len = 1000\noutput_len = 128\nrange_ratio = 0.5\n[load]\nnum_prompts = 10000\nrequest_rate = 10\n",
        );
        let pool = build_pool(&s, None).unwrap();
        let plan = plans_for(&s, &target(), &pool, None, "r", 0, 1).remove(0);
        let words: usize = plan
            .pool
            .iter()
            .map(|e| e.prompt.text().split_whitespace().count())
            .sum();
        let t = Instant::now();
        let bytes = encode_plan(&plan).encode_to_vec();
        let sent = DeflatedPool::new(&plan.pool, &plan.shapes);
        let encode = t.elapsed();
        let t = Instant::now();
        let pool = through(&sent);
        let back = decode_plan(
            v1::Plan::decode(bytes.as_slice()).unwrap(),
            PLAN_FORMAT,
            pool,
        )
        .unwrap();
        let decode = t.elapsed();
        assert_eq!(back, plan);
        let raw = super::pool::pool(&plan.pool, &plan.shapes).encoded_len();
        let t = Instant::now();
        let json = serde_json::to_vec(&plan).unwrap();
        let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&json).unwrap();
        let deflated_json = enc.finish().unwrap();
        let json_encode = t.elapsed();
        println!(
            "{} entries, {words} words: typed plan {} bytes and pool {} bytes deflated ({raw} before), encode {encode:?}, decode {decode:?}; JSON {} bytes, deflated {} bytes, encode {json_encode:?}",
            plan.pool.len(),
            bytes.len(),
            sent.bytes(),
            json.len(),
            deflated_json.len()
        );
    }
}
