//! The flags of `cicada run`, `web`, `mock` and `validate` (with `vllm bench
//! serve`'s), turned into the coordinator's plain settings.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use cicada_plan::units::parse_duration;

use super::mock::MockFlags;

/// `cicada run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The scenario file (TOML); without one, the vllm bench serve flags describe the run.
    pub scenario: Option<PathBuf>,
    /// Local worker processes to start (default 1, or 0 with --expect-workers).
    #[arg(long)]
    pub workers: Option<u32>,
    /// Workers that must join before the run starts, local ones included;
    /// remote workers dial --listen with `cicada worker --coordinator http://HOST:PORT`.
    #[arg(long, env = "CICADA_EXPECT_WORKERS")]
    pub expect_workers: Option<u32>,
    /// File holding the shared worker token (default: the CICADA_TOKEN
    /// environment variable; a random one for local-only fleets).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Serve the worker port over TLS with this certificate (PEM).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) for --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require workers to present a client certificate signed by this CA (mutual TLS).
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// The CA (PEM) that signed --tls-cert, for local workers to verify the
    /// coordinator (default: the certificates in --tls-cert).
    #[arg(long, requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,
    /// Directory for result files (overrides output.dir).
    #[arg(long)]
    pub output_dir: Option<PathBuf>,
    /// Override any scenario key: --set load.request_rate=10 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Run the whole scenario N times (run.repeats), each under
    /// `run-<i>/` of the output directory, then summarise: each headline
    /// figure's mean, sd, CV, confidence interval and pooled value.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub num_runs: Option<u32>,
    /// Repeated runs keep the same seed (and mock.seed) instead of
    /// seed + i − 1 for run i (run.vary_seed = false).
    #[arg(long)]
    pub same_seed: bool,
    /// Empty the server's prefix cache before each step (hooks.reset_prefix_cache):
    /// alone, the route of the target's engine; or vllm (POST
    /// /reset_prefix_cache, which needs VLLM_SERVER_DEV_MODE=1 on the
    /// server), sglang (POST /flush_cache), or a path.
    #[arg(long, value_name = "vllm|sglang|PATH", num_args = 0..=1, default_missing_value = "true")]
    pub reset_prefix_cache: Option<String>,
    /// Start the server's profiler before each step and stop it after
    /// (hooks.profile: POST /start_profile, /stop_profile; vLLM needs
    /// --profiler-config).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub profile: bool,
    /// Address of the coordinator's gRPC server.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// The cicada executable local workers run as `<it> worker` (default:
    /// this one).
    #[arg(long, env = "CICADA_WORKER_BIN")]
    pub worker_bin: Option<PathBuf>,
    /// How long to wait for every worker to join.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub wait_workers: Duration,
    /// Silence after which a worker counts as lost.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub heartbeat_timeout: Duration,
    /// No live progress at all.
    #[arg(long)]
    pub quiet: bool,
    /// One progress line per interval instead of a progress bar (the default
    /// when stderr is not a terminal).
    #[arg(long)]
    pub headless: bool,
    /// Serve the fleet's live counters and latency quantiles in Prometheus
    /// text format at http://ADDR/metrics while the run goes.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Serve Locust's web UI and API while the run goes (default address
    /// 127.0.0.1:8089; any address outside 127.0.0.0/8 and ::1 needs a token).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8089")]
    pub web: Option<SocketAddr>,
    /// Start idle (implies --web), with the fleet attached, until the page's
    /// start form (or `POST /swarm`) starts the run; stay up after it until
    /// Ctrl-C.
    #[arg(long)]
    pub web_wait: bool,
    /// File holding the web UI's token (default: the CICADA_WEB_TOKEN
    /// environment variable); every request must carry it.
    #[arg(long, value_name = "FILE")]
    pub web_token_file: Option<PathBuf>,
    /// Serve Locust's own built web UI at / instead of cicada's page (which
    /// stays at /cicada): the webui/dist directory of a locust wheel, as
    /// scripts/locust-webui.sh unpacks it.
    #[arg(long, value_name = "DIR")]
    pub web_ui: Option<PathBuf>,
    /// Exit with code 4 when more than this share of requests fail
    /// (output.max_failure_ratio; unset: when more than half of the run's fail).
    #[arg(long, value_name = "RATIO")]
    pub max_failure_ratio: Option<f64>,
    /// Exit with code 5 when fewer than this share of requests meet every
    /// [slo] bound (slo.min_attainment).
    #[arg(long, value_name = "RATIO")]
    pub min_slo_attainment: Option<f64>,
    /// SLOs for goodput in vLLM's form: --goodput ttft:500 tpot:50 (ms; ttft, tpot, e2el, itl, ttfa).
    #[arg(long, num_args = 1.., value_name = "METRIC:MS")]
    pub goodput: Vec<String>,
    /// Build the dataset and plans exactly as the run would (same seed, same
    /// workers), print what it would send (requests, length spreads, token
    /// totals, each worker's share, sample prompts) and send nothing
    /// (vllm-bench's --dry-run).
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: print the description as JSON.
    #[arg(long, requires = "dry_run")]
    pub json: bool,
    #[command(flatten)]
    pub vllm: VllmFlags,
}

impl From<RunArgs> for cicada_coordinator::cli::RunArgs {
    fn from(a: RunArgs) -> Self {
        let RunArgs {
            scenario,
            workers,
            expect_workers,
            token_file,
            tls_cert,
            tls_key,
            tls_client_ca,
            tls_ca,
            output_dir,
            mut sets,
            num_runs,
            same_seed,
            reset_prefix_cache,
            profile,
            listen,
            worker_bin,
            wait_workers,
            heartbeat_timeout,
            quiet,
            headless,
            metrics_addr,
            web,
            web_wait,
            web_token_file,
            web_ui,
            max_failure_ratio,
            min_slo_attainment,
            goodput,
            dry_run: _,
            json: _,
            vllm,
        } = a;
        // the repeat flags are `[run]` keys, over the file and every --set
        sets.extend(num_runs.map(|n| format!("run.repeats={n}")));
        if same_seed {
            sets.push("run.vary_seed=false".into());
        }
        // so are the hook flags, `[hooks]` keys
        sets.extend(reset_prefix_cache.map(|r| match r.as_str() {
            "true" | "false" => format!("hooks.reset_prefix_cache={r}"),
            named => format!("hooks.reset_prefix_cache=\"{named}\""),
        }));
        if profile {
            sets.push("hooks.profile=true".into());
        }
        Self {
            scenario,
            workers,
            expect_workers,
            token_file,
            tls_cert,
            tls_key,
            tls_client_ca,
            tls_ca,
            output_dir,
            sets,
            listen,
            worker_bin,
            wait_workers,
            heartbeat_timeout,
            quiet,
            headless,
            metrics_addr,
            web,
            web_wait,
            web_token_file,
            web_ui,
            max_failure_ratio,
            min_slo_attainment,
            goodput,
            vllm: vllm.into(),
        }
    }
}

/// `cicada mock`.
#[derive(Debug, Clone, clap::Args)]
pub struct MockArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,
    /// Serve HTTPS with this PEM certificate chain (needs --tls-key).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key for --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    #[command(flatten)]
    pub config: MockFlags,
}

impl From<MockArgs> for cicada_coordinator::cli::MockArgs {
    fn from(a: MockArgs) -> Self {
        let MockArgs {
            listen,
            tls_cert,
            tls_key,
            config,
        } = a;
        Self {
            listen,
            tls_cert,
            tls_key,
            config: config.into(),
        }
    }
}

/// `cicada validate`.
#[derive(Debug, Clone, clap::Args)]
pub struct ValidateArgs {
    /// The scenario file (TOML).
    pub scenario: PathBuf,
    /// Overrides to apply before validating.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}

impl From<ValidateArgs> for cicada_coordinator::cli::ValidateArgs {
    fn from(a: ValidateArgs) -> Self {
        let ValidateArgs { scenario, sets } = a;
        Self { scenario, sets }
    }
}

/// The `vllm bench serve` flags `cicada run` understands.
#[derive(Debug, Clone, clap::Args)]
pub struct VllmFlags {
    /// Serving API (vLLM's names work too: llama.cpp, tensorrt-llm, ...).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub backend: Option<String>,
    /// Server base URL, with any path prefix (default http://HOST:PORT).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub base_url: Option<String>,
    /// Server host when no --base-url is given.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub host: Option<String>,
    /// Server port when no --base-url is given.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub port: Option<u16>,
    /// Route appended to the base URL.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub endpoint: Option<String>,
    /// Model id (default: the first one the server lists).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub model: Option<String>,
    /// LoRA adapters the requests split over, as vLLM's server lists them
    /// (NAME or NAME=PATH; the names become target.models, equal weights).
    #[arg(long, num_args = 1.., value_name = "NAME[=PATH]", help_heading = "vllm bench serve flags")]
    pub lora_modules: Vec<String>,
    /// How requests pick an adapter: random or round-robin.
    #[arg(
        long,
        value_name = "random|round-robin",
        help_heading = "vllm bench serve flags"
    )]
    pub lora_assignment: Option<String>,
    /// Tokenizer: a tokenizer.json, a model directory or a cached hub id.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub tokenizer: Option<String>,
    /// Dataset kind.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub dataset_name: Option<String>,
    /// Dataset file.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub dataset_path: Option<PathBuf>,
    /// Requests in the run.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub num_prompts: Option<u64>,
    /// Mean arrival rate (req/s) or "inf".
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub request_rate: Option<String>,
    /// Gamma shape of arrival gaps (1 = Poisson).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub burstiness: Option<f64>,
    /// Most requests in flight at once.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub max_concurrency: Option<u32>,
    /// Seed for sampling and arrivals.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub seed: Option<u64>,
    /// Generate past end-of-sequence up to the asked length.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub ignore_eos: bool,
    /// Metrics with printed percentiles, comma-separated (ttft,tpot,itl,e2el,...).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub percentile_metrics: Option<String>,
    /// Percentiles to print, comma-separated (e.g. 25,50,99).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub metric_percentiles: Option<String>,
    /// Accepted for compatibility: cicada always saves result.json.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub save_result: bool,
    /// Also write every request's record to requests.jsonl (output.save_detailed).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub save_detailed: bool,
    /// Directory for the result files (output.dir).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub result_dir: Option<PathBuf>,
    /// File name of the JSON result (output.result_filename).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub result_filename: Option<String>,
    /// random dataset: prompt length in tokens.
    #[arg(long, alias = "input-len", help_heading = "vllm bench serve flags")]
    pub random_input_len: Option<u32>,
    /// random dataset: output length in tokens.
    #[arg(long, alias = "output-len", help_heading = "vllm bench serve flags")]
    pub random_output_len: Option<u32>,
    /// random dataset: lengths vary within ± this ratio.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub random_range_ratio: Option<f64>,
    /// random dataset: tokens of a shared prefix.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub random_prefix_len: Option<u32>,
    /// random dataset: send each prompt as its token ids (`prompt: [ids]`, completions
    /// APIs only; needs --tokenizer): the server skips tokenizing and counts exactly
    /// the drawn length (dataset.prompt_token_ids).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub prompt_token_ids: bool,
    /// random-mm dataset: images per request, about.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub random_mm_base_items_per_request: Option<u32>,
    /// random-mm dataset: image counts vary within ± this ratio.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub random_mm_num_mm_items_range_ratio: Option<f64>,
    /// random-mm dataset: most items per request by modality, as JSON ('{"image": 3}').
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub random_mm_limit_mm_per_prompt: Option<String>,
    /// random-mm dataset: image sizes and weights, vLLM's '{(H, W, 1): p, ...}'.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub random_mm_bucket_config: Option<String>,
    /// Sampling temperature.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub top_p: Option<f64>,
    /// Top-k sampling.
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub top_k: Option<i64>,
    /// Extra request header KEY=VALUE (repeatable).
    #[arg(
        long = "header",
        value_name = "KEY=VALUE",
        help_heading = "vllm bench serve flags"
    )]
    pub headers: Vec<String>,
    /// Seconds to wait for the server to be ready (0 skips the check).
    #[arg(long, help_heading = "vllm bench serve flags")]
    pub ready_check_timeout_sec: Option<u64>,
    /// vllm-bench's multi-turn flags.
    #[command(flatten)]
    pub multi_turn: MultiTurnFlags,
}

/// vllm-bench's multi-turn flags (`--multi-turn` and its knobs).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MultiTurnFlags {
    /// Multi-turn sessions: synthetic (`multi_turn`) with the random
    /// dataset, ShareGPT's conversations with sharegpt; --num-prompts
    /// counts sessions.
    #[arg(long = "multi-turn", help_heading = "vllm bench serve flags")]
    pub enabled: bool,
    /// Turns per session.
    #[arg(long = "multi-turn-num-turns", help_heading = "vllm bench serve flags")]
    pub num_turns: Option<u32>,
    /// Fewest turns per session, drawn uniformly up to the most (0: --multi-turn-num-turns).
    #[arg(long = "multi-turn-min-turns", help_heading = "vllm bench serve flags")]
    pub min_turns: Option<u32>,
    /// Most turns per session (0: --multi-turn-num-turns; ShareGPT: uncapped).
    #[arg(long = "multi-turn-max-turns", help_heading = "vllm bench serve flags")]
    pub max_turns: Option<u32>,
    /// Sessions in flight at once (load.max_concurrency).
    #[arg(
        long = "multi-turn-concurrency",
        help_heading = "vllm bench serve flags"
    )]
    pub concurrency: Option<u32>,
    /// Pause between an answer and the next turn, ms.
    #[arg(long = "multi-turn-delay-ms", help_heading = "vllm bench serve flags")]
    pub delay_ms: Option<u64>,
    /// Tokens each turn after the first adds (0: --random-input-len).
    #[arg(long = "per-turn-input-len", help_heading = "vllm bench serve flags")]
    pub per_turn_input_len: Option<u32>,
}

impl From<MultiTurnFlags> for cicada_scenarios::vllm::MultiTurnFlags {
    fn from(m: MultiTurnFlags) -> Self {
        Self {
            enabled: m.enabled,
            num_turns: m.num_turns,
            min_turns: m.min_turns,
            max_turns: m.max_turns,
            concurrency: m.concurrency,
            delay_ms: m.delay_ms,
            per_turn_input_len: m.per_turn_input_len,
        }
    }
}

impl From<VllmFlags> for cicada_scenarios::vllm::VllmFlags {
    fn from(a: VllmFlags) -> Self {
        let VllmFlags {
            backend,
            base_url,
            host,
            port,
            endpoint,
            model,
            lora_modules,
            lora_assignment,
            tokenizer,
            dataset_name,
            dataset_path,
            num_prompts,
            request_rate,
            burstiness,
            max_concurrency,
            seed,
            ignore_eos,
            percentile_metrics,
            metric_percentiles,
            save_result,
            save_detailed,
            result_dir,
            result_filename,
            random_input_len,
            random_output_len,
            random_range_ratio,
            random_prefix_len,
            prompt_token_ids,
            random_mm_base_items_per_request,
            random_mm_num_mm_items_range_ratio,
            random_mm_limit_mm_per_prompt,
            random_mm_bucket_config,
            temperature,
            top_p,
            top_k,
            headers,
            ready_check_timeout_sec,
            multi_turn,
        } = a;
        Self {
            backend,
            base_url,
            host,
            port,
            endpoint,
            model,
            lora_modules,
            lora_assignment,
            tokenizer,
            dataset_name,
            dataset_path,
            num_prompts,
            request_rate,
            burstiness,
            max_concurrency,
            seed,
            ignore_eos,
            percentile_metrics,
            metric_percentiles,
            save_result,
            save_detailed,
            result_dir,
            result_filename,
            random_input_len,
            random_output_len,
            random_range_ratio,
            random_prefix_len,
            prompt_token_ids,
            random_mm_base_items_per_request,
            random_mm_num_mm_items_range_ratio,
            random_mm_limit_mm_per_prompt,
            random_mm_bucket_config,
            temperature,
            top_p,
            top_k,
            headers,
            ready_check_timeout_sec,
            multi_turn: multi_turn.into(),
        }
    }
}
