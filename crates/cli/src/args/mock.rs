//! `cicada mock`'s flags: the mock's whole specification spelled as options,
//! turned into the [`cicada_mock::MockConfig`] a scenario's `[mock]` section
//! also reads into (same names, same defaults).

/// How the mock behaves: timing, output length, dialect, faults. `cicada mock`'s
/// flags and a scenario's `[mock]` section are this one type, so both spell
/// every option alike and share its defaults and checks.
#[derive(Debug, Clone, clap::Args)]
pub struct MockFlags {
    /// Time from receiving a request to its first content event, ms.
    #[arg(long, default_value_t = 50.0)]
    pub ttft_ms: f64,
    /// Gap between consecutive output tokens, ms (an event of k tokens follows k gaps).
    #[arg(long, default_value_t = 10.0)]
    pub itl_ms: f64,
    /// Output tokens carried by each SSE event (speculative decoding, multi-step).
    #[arg(long, default_value_t = 1)]
    pub tokens_per_event: u32,
    /// Output tokens when the request does not ask for a number.
    #[arg(long, default_value_t = 128)]
    pub output_tokens: u32,
    /// Uniform jitter added to each event's deadline, ± ms (0 = exact).
    #[arg(long, default_value_t = 0.0)]
    pub jitter_ms: f64,
    /// Extra TTFT per request already in flight, ms: latency that rises with load.
    #[arg(long, default_value_t = 0.0)]
    pub ttft_per_inflight_ms: f64,
    /// Extra inter-token gap per request in flight, ms.
    #[arg(long, default_value_t = 0.0)]
    pub itl_per_inflight_ms: f64,
    /// Report usage (prompt and completion tokens) when the client asks for it.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub usage: bool,
    /// Send a role-only first chunk on chat streams, as vLLM does.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub role_chunk: bool,
    /// End every response after this many tokens, as if the model emitted
    /// end-of-sequence, unless the request sets `ignore_eos` (`min_tokens`
    /// raises the point): outputs shorter than asked, on demand. OpenAI routes
    /// finish with "stop", TGI with "eos_token", llama.cpp with `stop_type`
    /// "eos"; Triton streams just end.
    #[arg(long)]
    pub eos_after_tokens: Option<u32>,
    /// Model id served at /v1/models (and the Triton model name).
    #[arg(long, default_value = "cicada-mock")]
    pub model: String,
    /// The API a scenario drives the embedded mock through; on the OpenAI
    /// routes the llama.cpp choices also switch to llama.cpp's dialect
    /// (`timings`, separate finish chunk). Native TGI, llama.cpp and Triton
    /// routes are always served.
    #[arg(long, value_enum, default_value_t = MockApi::OpenaiChat)]
    pub api: MockApi,
    /// KV-cache capacity in tokens, for the `vllm:kv_cache_usage_perc` gauge
    /// and the preemption counter (a request whose prompt plus requested
    /// output would overfill the cache counts one preemption).
    #[arg(long, default_value_t = 1_000_000)]
    pub kv_cache_tokens: u64,
    /// Simulate vLLM's prefix cache (16-token blocks): cache hits are counted
    /// in `/metrics` and in llama.cpp's `timings.cache_n`.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub prefix_cache: bool,
    /// Report `usage.prompt_tokens_details.cached_tokens` (vLLM's
    /// `--enable-prompt-tokens-details`).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub prompt_tokens_details: bool,
    /// Speculative tokens proposed per decode step (0 = no speculative
    /// decoding). Each event after the first is one step whose extra tokens
    /// (`tokens_per_event - 1`, at most this many) count as accepted drafts.
    #[arg(long, default_value_t = 0)]
    pub spec_tokens: u32,
    /// Require `Authorization: Bearer <key>` on the API routes, as vLLM's
    /// `--api-key` does (`x-api-key: <key>` on `/v1/messages`, as Anthropic
    /// reads it; health and metrics stay open). Command line only:
    /// never read from or written to a scenario.
    #[arg(long, env = "CICADA_MOCK_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Close every connection once its response is out, while answering as
    /// if it were kept alive (no `Connection: close`), as llama.cpp's
    /// `llama-server` does: a client that reuses it must reconnect.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub close_after_response: bool,
    /// Close a keep-alive connection after this long without a request, ms
    /// (uvicorn's keep-alive timeout in front of vLLM and SGLang is 5 s).
    #[arg(long)]
    pub idle_timeout_ms: Option<u64>,
    /// End each connection once it has taken this many requests, as nginx's
    /// `keepalive_requests` does: HTTP/2 says GOAWAY (streams already sent
    /// finish, later ones are refused), HTTP/1.1 closes after that response.
    #[arg(long)]
    pub keepalive_requests: Option<u32>,
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` on HTTP/2 connections (hyper's
    /// default otherwise): streams past it are refused (`REFUSED_STREAM`).
    #[arg(long)]
    pub h2_max_streams: Option<u32>,
    /// Share of tool-call and JSON answers (requests with tools or a
    /// response format) broken on purpose: a value of the wrong type, which
    /// a client's check must count as `invalid_output`.
    #[arg(long, default_value_t = 0.0)]
    pub invalid_output: f64,
    /// Output tokens each chat, Responses or Messages answer spends
    /// reasoning before it answers: on chat the first this many tokens
    /// stream as reasoning deltas (see `reasoning_field`) and usage reports
    /// them in `completion_tokens_details.reasoning_tokens`; on Responses as
    /// a reasoning item (`output_tokens_details.reasoning_tokens`); on
    /// Messages as a thinking block (no count in Anthropic's usage). They
    /// stay part of the output count, as vLLM counts them. 0: no reasoning.
    #[arg(long, default_value_t = 0)]
    pub reasoning_tokens: u32,
    /// Which delta field carries the reasoning: vLLM's `reasoning_content`,
    /// vLLM 0.32's newer `reasoning`, or both at once.
    #[arg(long, value_enum, default_value_t = ReasoningField::ReasoningContent)]
    pub reasoning_field: ReasoningField,
    /// Answer the server-hook routes (/reset_prefix_cache, /flush_cache,
    /// /start_profile, /stop_profile) with this HTTP status instead of
    /// success, to see a client's [hooks] fail.
    #[arg(long, value_name = "STATUS")]
    pub hook_status: Option<u16>,
    /// Hook calls answered normally before --hook-status applies (0: it
    /// applies from the first), so a later step's hook fails.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub hook_ok_calls: u32,
    /// Seed for jitter and fault selection.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Fault injection rates.
    #[command(flatten)]
    pub faults: FaultFlags,
}

impl From<MockFlags> for cicada_mock::MockConfig {
    fn from(a: MockFlags) -> Self {
        let MockFlags {
            ttft_ms,
            itl_ms,
            tokens_per_event,
            output_tokens,
            jitter_ms,
            ttft_per_inflight_ms,
            itl_per_inflight_ms,
            usage,
            role_chunk,
            eos_after_tokens,
            model,
            api,
            kv_cache_tokens,
            prefix_cache,
            prompt_tokens_details,
            spec_tokens,
            api_key,
            close_after_response,
            idle_timeout_ms,
            keepalive_requests,
            h2_max_streams,
            invalid_output,
            reasoning_tokens,
            reasoning_field,
            hook_status,
            hook_ok_calls,
            seed,
            faults,
        } = a;
        Self {
            ttft_ms,
            itl_ms,
            tokens_per_event,
            output_tokens,
            jitter_ms,
            ttft_per_inflight_ms,
            itl_per_inflight_ms,
            usage,
            role_chunk,
            eos_after_tokens,
            model,
            api: api.into(),
            kv_cache_tokens,
            prefix_cache,
            prompt_tokens_details,
            spec_tokens,
            api_key,
            close_after_response,
            idle_timeout_ms,
            keepalive_requests,
            h2_max_streams,
            invalid_output,
            reasoning_tokens,
            reasoning_field: reasoning_field.into(),
            hook_status,
            hook_ok_calls,
            seed,
            faults: faults.into(),
        }
    }
}

/// Probability, per request, of each injected fault (their sum must be ≤ 1).
#[derive(Debug, Clone, clap::Args)]
pub struct FaultFlags {
    /// Answer 429 Too Many Requests.
    #[arg(long = "fault-http-429", default_value_t = 0.0)]
    pub http_429: f64,
    /// Answer 500 Internal Server Error.
    #[arg(long = "fault-http-500", default_value_t = 0.0)]
    pub http_500: f64,
    /// Reset the connection half-way through the stream.
    #[arg(long = "fault-reset", default_value_t = 0.0)]
    pub reset: f64,
    /// Send an event whose JSON is malformed.
    #[arg(long = "fault-malformed", default_value_t = 0.0)]
    pub malformed: f64,
    /// Send an in-band `{"error": ...}` event inside the 200 stream.
    #[arg(long = "fault-error-event", default_value_t = 0.0)]
    pub error_event: f64,
    /// Stop sending after the first token and hold the connection open.
    #[arg(long = "fault-stall", default_value_t = 0.0)]
    pub stall: f64,
    /// End the stream cleanly but without a finish reason or `[DONE]`.
    #[arg(long = "fault-truncate", default_value_t = 0.0)]
    pub truncate: f64,
    /// Complete with no content at all.
    #[arg(long = "fault-empty", default_value_t = 0.0)]
    pub empty: f64,
}

impl From<FaultFlags> for cicada_mock::FaultRates {
    fn from(a: FaultFlags) -> Self {
        let FaultFlags {
            http_429,
            http_500,
            reset,
            malformed,
            error_event,
            stall,
            truncate,
            empty,
        } = a;
        Self {
            http_429,
            http_500,
            reset,
            malformed,
            error_event,
            stall,
            truncate,
            empty,
        }
    }
}

/// The API a client uses to talk to the mock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "kebab-case")]
pub enum MockApi {
    /// OpenAI chat completions, vLLM's dialect.
    OpenaiChat,
    /// OpenAI completions, vLLM's dialect.
    Openai,
    /// TGI's `/generate_stream`.
    Tgi,
    /// llama.cpp's native `/completion`.
    Llamacpp,
    /// OpenAI chat completions, llama.cpp's dialect.
    LlamacppChat,
    /// OpenAI completions, llama.cpp's dialect.
    LlamacppCompletions,
    /// Triton's `/v2/models/{model}/generate_stream`.
    Triton,
    /// OpenAI Responses, `/v1/responses`.
    OpenaiResponses,
    /// Anthropic Messages, `/v1/messages`.
    AnthropicMessages,
    /// OpenAI embeddings, `/v1/embeddings` (a pooling API).
    OpenaiEmbeddings,
    /// vLLM's rerank, `/v1/rerank` (a pooling API).
    VllmRerank,
    /// HuggingFace TEI's `/embed` (a pooling API).
    TeiEmbed,
    /// HuggingFace TEI's `/rerank` (a pooling API).
    TeiRerank,
    /// vLLM's pooling API, `/pooling` (a pooling API).
    VllmPooling,
    /// vLLM's score API, `/score` (a pooling API; a query and documents).
    VllmScore,
}

impl From<MockApi> for cicada_mock::MockApi {
    fn from(a: MockApi) -> Self {
        match a {
            MockApi::OpenaiChat => Self::OpenaiChat,
            MockApi::Openai => Self::Openai,
            MockApi::Tgi => Self::Tgi,
            MockApi::Llamacpp => Self::Llamacpp,
            MockApi::LlamacppChat => Self::LlamacppChat,
            MockApi::LlamacppCompletions => Self::LlamacppCompletions,
            MockApi::Triton => Self::Triton,
            MockApi::OpenaiResponses => Self::OpenaiResponses,
            MockApi::AnthropicMessages => Self::AnthropicMessages,
            MockApi::OpenaiEmbeddings => Self::OpenaiEmbeddings,
            MockApi::VllmRerank => Self::VllmRerank,
            MockApi::TeiEmbed => Self::TeiEmbed,
            MockApi::TeiRerank => Self::TeiRerank,
            MockApi::VllmPooling => Self::VllmPooling,
            MockApi::VllmScore => Self::VllmScore,
        }
    }
}

/// The chat delta field a reasoning mock puts its thinking in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum ReasoningField {
    /// `reasoning_content` (vLLM's reasoning parsers, llama.cpp's `deepseek` format).
    ReasoningContent,
    /// `reasoning` (vLLM 0.32's newer name).
    Reasoning,
    /// Both fields with the same text, as a server in transition might send.
    Both,
}

impl From<ReasoningField> for cicada_mock::ReasoningField {
    fn from(a: ReasoningField) -> Self {
        match a {
            ReasoningField::ReasoningContent => Self::ReasoningContent,
            ReasoningField::Reasoning => Self::Reasoning,
            ReasoningField::Both => Self::Both,
        }
    }
}
