//! `cicada selftest`'s flags, turned into the harness's plain settings.

use std::path::PathBuf;

/// `cicada selftest` options.
#[derive(Debug, Clone, clap::Args)]
pub struct SelftestArgs {
    /// Concurrent streams (closed-loop users) to try, in order.
    #[arg(long, value_delimiter = ',', default_value = "1,64,512,2048,8192")]
    pub levels: Vec<u32>,
    /// Measured seconds per level (after a ramp of up to 2 s).
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Output tokens per request.
    #[arg(long, default_value_t = 128)]
    pub output_tokens: u32,
    /// The mock's time to first token, ms.
    #[arg(long, default_value_t = 50.0)]
    pub ttft_ms: f64,
    /// The mock's gap between tokens, ms.
    #[arg(long, default_value_t = 10.0)]
    pub itl_ms: f64,
    /// Core the mock is pinned to.
    #[arg(long, default_value_t = 0)]
    pub mock_core: usize,
    /// Core the coordinator and its worker are pinned to.
    #[arg(long, default_value_t = 1)]
    pub worker_core: usize,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Instead of the levels: run the same load for each of these request
    /// counts and compare the worker's peak RSS (memory must not grow with run length).
    #[arg(long, value_delimiter = ',')]
    pub rss_requests: Vec<u64>,
    /// Instead of the levels: this many multi-turn sessions all in flight
    /// at once (5 turns of 1,024 + 4x128 input tokens, 8 output tokens, 5 s
    /// think time, mock TTFT and gap 100 ms), for each count; prints the
    /// worker's peak RSS and its share per session.
    #[arg(long, value_delimiter = ',')]
    pub sessions: Vec<u64>,
    /// Instead of the levels: prompts of these many tokens (e.g.
    /// 1024,32768,131072), each at every --levels count of streams in a
    /// closed loop; prints peak worker RSS, TTFT error and p99 per length.
    #[arg(long, value_delimiter = ',')]
    pub prompt_tokens: Vec<u32>,
    /// Skip the floor client (cicada's figures only).
    #[arg(long)]
    pub no_floor: bool,
    /// Serve the mock over TLS (a CA and a certificate made for the run)
    /// and run cicada over https: what TLS costs the client, and that its
    /// receive stamps stay the kernel's. The floor client speaks plain
    /// HTTP/1.1 only, so its table is left out.
    #[arg(long)]
    pub tls: bool,
    /// The HTTP version cicada speaks (`target.http`): "1.1", "2" (over
    /// plain TCP: h2c) or "auto".
    #[arg(long, default_value = "1.1", value_parser = ["1.1", "2", "auto"])]
    pub http: String,
    /// Instead of the levels: measure the coordinator's cost per worker with
    /// this many simulated workers (e.g. 64,256,1024), each sending a
    /// realistic report once a second for --seconds.
    #[arg(long, value_delimiter = ',')]
    pub fleet: Vec<u32>,
    /// Internal: be the simulated fleet of the first --fleet size for the
    /// coordinator at this URL (the selftest runs itself so).
    #[arg(long, hide = true)]
    pub fleet_sim: Option<String>,
    /// Instead of the levels: requests per second per core on the mock's
    /// non-streamed route, at fixed rates (--rates) and in a closed loop
    /// (--connections), beside oha and wrk (scripts/load-tools.sh installs them).
    #[arg(long)]
    pub http_rate: bool,
    /// --http-rate: the fixed rates, requests per second.
    #[arg(long, value_delimiter = ',', default_value = "2000,10000")]
    pub rates: Vec<u32>,
    /// --http-rate: closed-loop users (wrk's and oha's connections).
    #[arg(long, default_value_t = 64)]
    pub connections: u32,
    /// --http-rate: the mock's delay before each answer at the fixed rates, ms.
    #[arg(long, default_value_t = 1.0)]
    pub http_rate_delay_ms: f64,
    /// --http-rate: the mock's delay in the closed loop, ms.
    #[arg(long, default_value_t = 0.0)]
    pub http_rate_closed_delay_ms: f64,
    /// --http-rate: where scripts/load-tools.sh installed oha and wrk
    /// (default: its directory under ~/.cache/cicada).
    #[arg(long)]
    pub load_tools: Option<PathBuf>,
    /// --http-rate: measure cicada alone, without oha and wrk (the output says so).
    #[arg(long)]
    pub no_load_tools: bool,
    /// Internal: be the floor client for the first level against this mock
    /// and print its figures as one JSON line (the selftest runs itself so).
    #[arg(long, hide = true)]
    pub floor_url: Option<String>,
}

impl From<SelftestArgs> for cicada_bench::SelftestArgs {
    fn from(a: SelftestArgs) -> Self {
        let SelftestArgs {
            levels,
            seconds,
            output_tokens,
            ttft_ms,
            itl_ms,
            mock_core,
            worker_core,
            json,
            rss_requests,
            sessions,
            prompt_tokens,
            no_floor,
            tls,
            http,
            fleet,
            fleet_sim,
            http_rate,
            rates,
            connections,
            http_rate_delay_ms,
            http_rate_closed_delay_ms,
            load_tools,
            no_load_tools,
            floor_url,
        } = a;
        Self {
            levels,
            seconds,
            output_tokens,
            ttft_ms,
            itl_ms,
            mock_core,
            worker_core,
            json,
            rss_requests,
            sessions,
            prompt_tokens,
            no_floor,
            tls,
            http,
            fleet,
            fleet_sim,
            http_rate,
            rates,
            connections,
            http_rate_delay_ms,
            http_rate_closed_delay_ms,
            load_tools,
            no_load_tools,
            floor_url,
        }
    }
}
