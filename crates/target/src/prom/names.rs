//! Which metric names each server family (vLLM, SGLang, TGI, llama.cpp)
//! exposes, and which family a scrape came from.

use super::text::Exposition;

/// Metric names of one server family; where versions differ, newest first.
pub(super) struct Names {
    pub(super) source: &'static str,
    pub(super) prefix: &'static str,
    pub(super) finished: &'static [&'static str],
    pub(super) prompt: &'static [&'static str],
    pub(super) generation: &'static [&'static str],
    pub(super) prefix_queries: &'static [&'static str],
    pub(super) prefix_hits: &'static [&'static str],
    pub(super) preemptions: &'static [&'static str],
    pub(super) kv_usage: &'static [&'static str],
    pub(super) running: &'static [&'static str],
    pub(super) waiting: &'static [&'static str],
    pub(super) drafts: &'static [&'static str],
    pub(super) draft_tokens: &'static [&'static str],
    pub(super) accepted: &'static [&'static str],
    pub(super) per_position: &'static [&'static str],
    /// Gauges of running averages (SGLang, vLLM V0), averaged over the run's scrapes.
    pub(super) accept_rate_gauge: &'static [&'static str],
    pub(super) accept_length_gauge: &'static [&'static str],
    pub(super) ttft: &'static [&'static str],
    pub(super) queue: &'static [&'static str],
    pub(super) e2e: &'static [&'static str],
    /// Per-request time per output token after the first (the server's TPOT).
    pub(super) tpot: &'static [&'static str],
    /// Gaps between a request's tokens as the engine emitted them.
    pub(super) itl: &'static [&'static str],
}

const FAMILIES: [Names; 4] = [
    Names {
        source: "vllm",
        prefix: "vllm:",
        finished: &["vllm:request_success_total"],
        prompt: &["vllm:prompt_tokens_total"],
        generation: &["vllm:generation_tokens_total"],
        prefix_queries: &[
            "vllm:prefix_cache_queries_total",
            "vllm:gpu_prefix_cache_queries_total",
        ],
        prefix_hits: &[
            "vllm:prefix_cache_hits_total",
            "vllm:gpu_prefix_cache_hits_total",
        ],
        preemptions: &["vllm:num_preemptions_total"],
        kv_usage: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
        running: &["vllm:num_requests_running"],
        waiting: &["vllm:num_requests_waiting"],
        drafts: &["vllm:spec_decode_num_drafts_total"],
        draft_tokens: &["vllm:spec_decode_num_draft_tokens_total"],
        accepted: &["vllm:spec_decode_num_accepted_tokens_total"],
        per_position: &["vllm:spec_decode_num_accepted_tokens_per_pos_total"],
        accept_rate_gauge: &["vllm:spec_decode_draft_acceptance_rate"],
        accept_length_gauge: &[],
        ttft: &["vllm:time_to_first_token_seconds"],
        queue: &["vllm:request_queue_time_seconds"],
        e2e: &["vllm:e2e_request_latency_seconds"],
        tpot: &[
            "vllm:request_time_per_output_token_seconds",
            "vllm:time_per_output_token_seconds",
        ],
        itl: &["vllm:inter_token_latency_seconds"],
    },
    Names {
        source: "sglang",
        prefix: "sglang:",
        finished: &["sglang:num_requests_total"],
        prompt: &["sglang:prompt_tokens_total"],
        generation: &["sglang:generation_tokens_total"],
        prefix_queries: &["sglang:prompt_tokens_total"],
        prefix_hits: &["sglang:cached_tokens_total"],
        preemptions: &["sglang:num_retracted_requests_total"],
        kv_usage: &["sglang:token_usage"],
        running: &["sglang:num_running_reqs"],
        waiting: &["sglang:num_queue_reqs"],
        drafts: &[],
        draft_tokens: &[],
        accepted: &[],
        per_position: &[],
        accept_rate_gauge: &["sglang:spec_accept_rate"],
        accept_length_gauge: &["sglang:spec_accept_length"],
        ttft: &["sglang:time_to_first_token_seconds"],
        queue: &["sglang:queue_time_seconds"],
        e2e: &["sglang:e2e_request_latency_seconds"],
        tpot: &["sglang:time_per_output_token_seconds"],
        itl: &["sglang:inter_token_latency_seconds"],
    },
    Names {
        source: "tgi",
        prefix: "tgi_",
        finished: &["tgi_request_success"],
        prompt: &["tgi_request_input_length_sum"],
        generation: &["tgi_request_generated_tokens_sum"],
        prefix_queries: &[],
        prefix_hits: &[],
        preemptions: &[],
        kv_usage: &[],
        running: &["tgi_batch_current_size"],
        waiting: &["tgi_queue_size"],
        drafts: &[],
        draft_tokens: &[],
        accepted: &[],
        per_position: &[],
        accept_rate_gauge: &[],
        accept_length_gauge: &[],
        ttft: &[],
        queue: &["tgi_request_queue_duration"],
        e2e: &["tgi_request_duration"],
        tpot: &["tgi_request_mean_time_per_token_duration"],
        itl: &[],
    },
    Names {
        source: "llamacpp",
        prefix: "llamacpp:",
        finished: &[],
        prompt: &["llamacpp:prompt_tokens_total"],
        generation: &["llamacpp:tokens_predicted_total"],
        prefix_queries: &[],
        prefix_hits: &[],
        preemptions: &[],
        kv_usage: &[],
        running: &["llamacpp:requests_processing"],
        waiting: &["llamacpp:requests_deferred"],
        drafts: &["llamacpp:spec_decode_num_drafts_total"],
        draft_tokens: &["llamacpp:spec_decode_num_draft_tokens_total"],
        accepted: &["llamacpp:spec_decode_num_accepted_tokens_total"],
        per_position: &[],
        accept_rate_gauge: &[],
        accept_length_gauge: &[],
        ttft: &[],
        queue: &[],
        e2e: &[],
        tpot: &[],
        itl: &[],
    },
];

pub(super) fn first<T>(names: &[&str], f: impl Fn(&str) -> Option<T>) -> Option<T> {
    names.iter().find_map(|n| f(n))
}

/// Which family an exposition belongs to.
pub(super) fn family(e: &Exposition) -> Option<&'static Names> {
    FAMILIES.iter().find(|f| e.has_prefix(f.prefix))
}
