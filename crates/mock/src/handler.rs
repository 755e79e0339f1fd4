//! One generation request, whatever API it came in on: read it, account for
//! it (ground truth, prefix cache, KV cache, `/metrics`), inject its fault,
//! and answer with a timed stream or a whole body in the API's format.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;

use crate::reply::{ResponseBody, Shared, error_json, json};
use crate::request::{IncomingRequest, count_words, fingerprint};
use crate::shaped::Shaped;
use crate::stats::LoggedRequest;
use crate::stream::{StreamSpec, Timing, TokenStream};
use crate::wire::{Api, Reply, text_fingerprint};
use crate::{Fault, MockConfig};

/// Header that marks cicada's readiness probe.
pub const PROBE_HEADER: &str = "x-cicada-probe";

/// Sequence numbers of probes start here, far from the run's own.
const PROBE_SEQ_BASE: u64 = 1 << 40;

pub(crate) fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(crate) fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn pick_fault(config: &MockConfig, seq: u64) -> Option<Fault> {
    if config.faults.total() <= 0.0 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed ^ seq.wrapping_mul(0xd134_2543_de82_ef95));
    let u: f64 = rng.random();
    let mut acc = 0.0;
    for (fault, rate) in config.faults.table() {
        acc += rate;
        if u < acc {
            return Some(fault);
        }
    }
    None
}

/// Whether request `seq`'s tool call or JSON answer is broken on purpose
/// (seeded apart from the faults).
fn pick_invalid(config: &MockConfig, seq: u64) -> bool {
    if config.invalid_output <= 0.0 {
        return false;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed ^ seq.wrapping_mul(0x2545_f491_4f6c_dd1d));
    rng.random::<f64>() < config.invalid_output
}

pub(crate) fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v.max(0.0) / 1000.0)
}

/// How a route wants its answer: as its request says, or always streamed/whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Streaming {
    /// The request's `stream` field decides (OpenAI, llama.cpp).
    AsAsked,
    /// The route streams (TGI `/generate_stream`, Triton `generate_stream`).
    Always,
    /// The route answers whole (TGI `/generate`, Triton `generate`).
    Never,
}

/// Serve one generation request: read it, account for it, inject its
/// fault, then answer with a timed stream or a whole body.
pub(crate) async fn generate(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    api: Api,
    streaming: Streaming,
    path: String,
) -> Response<ResponseBody> {
    let arrival = Instant::now();
    let probe = req.headers().contains_key(PROBE_HEADER);
    let request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let session = session_of(req.headers());
    let form = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::form::boundary)
        .map(str::to_string);
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return error_json(StatusCode::BAD_REQUEST, &format!("cannot read body: {e}")),
    };
    let (parsed, audio_bytes) = match form {
        // an upload: only the transcription route takes one
        Some(boundary) if path.ends_with("/audio/transcriptions") => {
            match crate::form::transcription(&body, &boundary) {
                Ok((r, file)) => (r, Some(file)),
                Err(e) => {
                    return error_json(StatusCode::BAD_REQUEST, &format!("invalid form: {e}"));
                }
            }
        }
        _ if path.ends_with("/audio/transcriptions") => {
            return error_json(
                StatusCode::BAD_REQUEST,
                "a transcription is a multipart/form-data upload",
            );
        }
        _ => match serde_json::from_slice::<IncomingRequest>(&body) {
            Ok(r) => (r, None),
            Err(e) => return error_json(StatusCode::BAD_REQUEST, &format!("invalid JSON: {e}")),
        },
    };
    if let Some(why) = (api == Api::Messages)
        .then(|| parsed.messages_refusal())
        .flatten()
    {
        return error_json(StatusCode::BAD_REQUEST, why);
    }
    let stream = match streaming {
        Streaming::AsAsked => parsed.stream,
        Streaming::Always => true,
        Streaming::Never => false,
    };
    let arrived = Arrived {
        at: arrival,
        probe,
        stream,
        parsed,
        audio_bytes,
        session,
    };
    let a = account(&shared, &arrived, request_id, path, api);
    match a.fault {
        Some(Fault::Http429) => {
            return error_json(StatusCode::TOO_MANY_REQUESTS, "mock injected rate limit");
        }
        Some(Fault::Http500) => {
            return error_json(
                StatusCode::INTERNAL_SERVER_ERROR,
                "mock injected server error",
            );
        }
        _ => {}
    }
    let spec = stream_spec(&shared, &arrived, &a, api);
    if stream {
        let stream = TokenStream::new(spec, shared.state.clone(), shared.clock.clone());
        let mut resp = Response::new(BodyExt::boxed(stream));
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("text/event-stream; charset=utf-8"),
        );
        h.insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-cache"),
        );
        return resp;
    }
    let echo = (api == Api::Triton && !arrived.parsed.exclude_input_in_output).then_some(a.prompt);
    whole(&shared, spec, echo.as_deref()).await
}

/// A request as it arrived.
struct Arrived {
    at: Instant,
    /// cicada's readiness probe: never faulted, not part of the run's ground truth.
    probe: bool,
    /// The answer streams.
    stream: bool,
    parsed: IncomingRequest,
    /// Bytes of the uploaded file, for a transcription.
    audio_bytes: Option<u64>,
    /// The session the request names ([`SESSION_HEADERS`]).
    session: Option<String>,
}

/// Headers that name a request's session, as prefix-aware routers read
/// them (vllm-bench's, Dynamo's, SGLang's gateway's): the first present is
/// logged as the request's session.
pub const SESSION_HEADERS: [&str; 3] = ["x-session-id", "x-dynamo-session-id", "x-smg-routing-key"];

/// The session a request names, if any.
fn session_of(headers: &http::HeaderMap) -> Option<String> {
    SESSION_HEADERS
        .iter()
        .find_map(|h| headers.get(*h))
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// What the mock decided for a request and counted of it.
struct Accounted {
    seq: u64,
    prompt: String,
    prompt_tokens: u32,
    cached_tokens: u32,
    fault: Option<Fault>,
    total_tokens: u32,
    eos: bool,
    /// A tool call or JSON answer, when the request asks for one (chat,
    /// Responses, Messages).
    shaped: Option<Shaped>,
}

/// Number the request, look its prompt up in the prefix cache, pick its
/// fault and its length, and count it in `/metrics` and the ground truth.
fn account(
    shared: &Shared,
    a: &Arrived,
    request_id: Option<String>,
    path: String,
    api: Api,
) -> Accounted {
    let state = &shared.state;
    let config = &shared.config;
    let seq = if a.probe {
        PROBE_SEQ_BASE + state.probes.fetch_add(1, Ordering::Relaxed)
    } else {
        state.requests.fetch_add(1, Ordering::Relaxed)
    };
    let prompt = a.parsed.prompt_text();
    let prompt_tokens = count_words(&prompt);
    let cached_tokens = if config.prefix_cache {
        state.prefix.lookup(&prompt)
    } else {
        0
    };
    let fault = if a.probe {
        None
    } else {
        pick_fault(config, seq)
    };
    let (total_tokens, eos) = a.parsed.output_tokens(config);
    let shaped = if matches!(api, Api::Chat | Api::Responses | Api::Messages) {
        let invalid = !a.probe && pick_invalid(config, seq);
        crate::shaped::answer(&a.parsed, total_tokens, invalid)
    } else {
        None
    };
    let server = &state.server;
    server
        .all
        .prompt_tokens
        .fetch_add(u64::from(prompt_tokens), Ordering::Relaxed);
    server
        .all
        .cached_tokens
        .fetch_add(u64::from(cached_tokens), Ordering::Relaxed);
    let (images, image_bytes) = a.parsed.images();
    if !a.probe {
        let run = &state.run;
        if let Some(m) = &a.parsed.model {
            run.named(m);
        }
        run.images.fetch_add(images, Ordering::Relaxed);
        run.image_bytes.fetch_add(image_bytes, Ordering::Relaxed);
        if let Some(n) = a.audio_bytes {
            run.audio_files.fetch_add(1, Ordering::Relaxed);
            run.audio_bytes.fetch_add(n, Ordering::Relaxed);
        }
        state
            .run
            .prompt_tokens
            .fetch_add(u64::from(prompt_tokens), Ordering::Relaxed);
        state
            .run
            .cached_tokens
            .fetch_add(u64::from(cached_tokens), Ordering::Relaxed);
        state.log_request(LoggedRequest {
            seq,
            offset_us: a.at.duration_since(shared.started).as_micros() as u64,
            unix_us: unix_micros(),
            path,
            prompt_fingerprint: fingerprint(&prompt),
            prompt_tokens,
            max_tokens: a.parsed.requested_tokens(),
            stream: a.stream,
            fault,
            request_id,
            session: a.session.clone(),
            messages: a.parsed.message_log(),
            output_tokens: total_tokens,
            output_fingerprint: text_fingerprint(seq, total_tokens),
            cached_tokens: config.prefix_cache.then_some(cached_tokens),
            invalid_output: shaped.as_ref().is_some_and(|s| s.invalid),
            images,
            audio_bytes: a.audio_bytes,
            inputs: None,
            model: a.parsed.model.clone(),
            token_ids: a.parsed.prompt_ids().is_some(),
        });
    }
    Accounted {
        seq,
        prompt,
        prompt_tokens,
        cached_tokens,
        fault,
        total_tokens,
        eos,
        shaped,
    }
}

/// Reserve the request's KV cache and time its answer: the stream's
/// deadlines and every field its events carry.
fn stream_spec(shared: &Shared, a: &Arrived, c: &Accounted, api: Api) -> StreamSpec {
    let state = &shared.state;
    let config = &shared.config;
    // KV cache: a request whose whole sequence does not fit next to the
    // others' counts as one preemption (the mock serves it anyway)
    let reserve = u64::from(c.prompt_tokens) + u64::from(c.total_tokens);
    let reserved = state.kv_reserved.fetch_add(reserve, Ordering::Relaxed) + reserve;
    if reserved > config.kv_cache_tokens {
        state.server.all.preemptions.fetch_add(1, Ordering::Relaxed);
        if !a.probe {
            state.run.preemptions.fetch_add(1, Ordering::Relaxed);
        }
    }
    state.kv_change(u64::from(c.prompt_tokens), true, config.kv_cache_tokens);
    let in_flight = state.in_flight.load(Ordering::Relaxed) as f64;
    // the load-dependent part of the TTFT stands for time spent queued
    let queued = ms(config.ttft_per_inflight_ms * in_flight);
    state.server.queue.observe(queued);
    let timing = Timing {
        start: a.at,
        ttft: ms(config.ttft_ms) + queued,
        event_gap: ms((config.itl_ms + config.itl_per_inflight_ms * in_flight)
            * f64::from(config.tokens_per_event.max(1))),
        jitter: ms(config.jitter_ms),
    };
    let parsed = &a.parsed;
    let options = parsed.stream_options.as_ref();
    let openai = matches!(api, Api::Chat | Api::Completions);
    let reply = Reply {
        api,
        transcription: a.audio_bytes.is_some(),
        llamacpp: openai && config.api.llamacpp_dialect(),
        seq: c.seq,
        created: unix_secs(),
        model_json: shared.model_json.clone(),
        counts: config.usage,
        final_usage: match api {
            Api::Chat | Api::Completions => options.is_some_and(|o| o.include_usage) || !a.stream,
            Api::Tgi => parsed.wants_details(),
            // usage always rides on the terminal event
            Api::LlamaCpp | Api::Responses | Api::Messages => true,
            Api::Triton => false,
        },
        continuous: options.is_some_and(|o| o.continuous_usage_stats),
        cached_details: config.prompt_tokens_details,
        role_chunk: config.role_chunk,
        prompt_tokens: c.prompt_tokens,
        cached_tokens: c.cached_tokens,
        total_tokens: c.total_tokens,
        limit_tokens: parsed
            .requested_tokens()
            .unwrap_or(config.output_tokens)
            .max(1),
        eos: c.eos,
        ttft_ms: config.ttft_ms,
        itl_ms: config.itl_ms,
        spec_tokens: config.spec_tokens,
        tokens_per_event: config.tokens_per_event.max(1),
        shaped: c.shaped.clone(),
        // chat, Responses and Messages answers think first when asked to;
        // the completions routes have no reasoning field
        reasoning_tokens: if matches!(api, Api::Chat | Api::Responses | Api::Messages) {
            config.reasoning_tokens.min(c.total_tokens)
        } else {
            0
        },
        reasoning_field: config.reasoning_field,
    };
    StreamSpec {
        reply,
        timing,
        fault: c.fault,
        seed: config.seed,
        probe: a.probe,
        kv_reserved: reserve,
        kv_capacity: config.kv_cache_tokens,
        spec_tokens: config.spec_tokens,
    }
}

/// A non-streamed answer: wait until the last token's deadline, then the body.
async fn whole(shared: &Shared, spec: StreamSpec, echo: Option<&str>) -> Response<ResponseBody> {
    let state = &shared.state;
    state.stream_opened();
    let r = &spec.reply;
    let per = r.tokens_per_event.max(1);
    let events = r.total_tokens.div_ceil(per).max(1);
    let t = spec.timing;
    let done_at = t.start + t.ttft + t.event_gap * (events - 1);
    match spec.fault {
        Some(Fault::Stall) => tokio::time::sleep(Duration::from_secs(24 * 3600)).await,
        _ => shared.clock.sleep_until(done_at).await,
    }
    let release = u64::from(r.prompt_tokens);
    state.kv_change(release, false, spec.kv_capacity);
    state
        .kv_reserved
        .fetch_sub(spec.kv_reserved, Ordering::Relaxed);
    state.stream_closed();
    match spec.fault {
        Some(Fault::ErrorEvent) => return json(StatusCode::OK, r.full_error()),
        Some(Fault::Malformed | Fault::Reset | Fault::Truncate) => {
            return json(StatusCode::OK, r.full_malformed());
        }
        _ => {}
    }
    let completion = if spec.fault == Some(Fault::Empty) {
        0
    } else {
        r.total_tokens
    };
    let server = &state.server;
    server.ttft.observe(t.ttft);
    server
        .e2e
        .observe(done_at.saturating_duration_since(t.start));
    server
        .generation_tokens
        .fetch_add(u64::from(completion), Ordering::Relaxed);
    let finished = if completion == 0 || r.eos {
        &server.finished_stop
    } else {
        &server.finished_length
    };
    finished.fetch_add(1, Ordering::Relaxed);
    let mut left = completion;
    let mut first = true;
    while left > 0 {
        let n = left.min(per);
        if !first {
            server.all.spec_step(n, spec.spec_tokens);
            if !spec.probe {
                state.run.spec_step(n, spec.spec_tokens);
            }
        }
        first = false;
        left -= n;
    }
    let mut out = String::with_capacity(64 + 8 * completion as usize);
    r.full(&mut out, completion, echo);
    if !spec.probe {
        state.completed.fetch_add(1, Ordering::Relaxed);
        state
            .output_tokens
            .fetch_add(u64::from(completion), Ordering::Relaxed);
    }
    json(StatusCode::OK, Bytes::from(out))
}
