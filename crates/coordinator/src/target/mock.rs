//! The embedded mock: the scenario's `[mock]` section (plain data in the
//! scenario model) turned into the mock server's own configuration.

use cicada_mock::{FaultRates, MockConfig};
use cicada_scenarios::scenario::{MockApi, MockSettings};

/// The embedded mock's configuration from the scenario's `[mock]` section.
pub fn mock_config(m: &MockSettings) -> MockConfig {
    let f = &m.faults;
    MockConfig {
        ttft_ms: m.ttft_ms,
        itl_ms: m.itl_ms,
        tokens_per_event: m.tokens_per_event,
        output_tokens: m.output_tokens,
        jitter_ms: m.jitter_ms,
        ttft_per_inflight_ms: m.ttft_per_inflight_ms,
        itl_per_inflight_ms: m.itl_per_inflight_ms,
        usage: m.usage,
        role_chunk: m.role_chunk,
        eos_after_tokens: m.eos_after_tokens,
        model: m.model.clone(),
        api: match m.api {
            MockApi::OpenaiChat => cicada_mock::MockApi::OpenaiChat,
            MockApi::Openai => cicada_mock::MockApi::Openai,
            MockApi::Tgi => cicada_mock::MockApi::Tgi,
            MockApi::Llamacpp => cicada_mock::MockApi::Llamacpp,
            MockApi::LlamacppChat => cicada_mock::MockApi::LlamacppChat,
            MockApi::LlamacppCompletions => cicada_mock::MockApi::LlamacppCompletions,
            MockApi::Triton => cicada_mock::MockApi::Triton,
        },
        kv_cache_tokens: m.kv_cache_tokens,
        prefix_cache: m.prefix_cache,
        prompt_tokens_details: m.prompt_tokens_details,
        spec_tokens: m.spec_tokens,
        // the key comes from `coord mock --api-key` only, never from a scenario
        api_key: None,
        close_after_response: m.close_after_response,
        idle_timeout_ms: m.idle_timeout_ms,
        seed: m.seed,
        faults: FaultRates {
            http_429: f.http_429,
            http_500: f.http_500,
            reset: f.reset,
            malformed: f.malformed,
            error_event: f.error_event,
            stall: f.stall,
            truncate: f.truncate,
            empty: f.empty,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scenario's `[mock]` and the mock's own configuration spell every
    /// setting alike: converting keeps each value and key.
    #[test]
    fn mock_settings_become_the_mock_config_key_for_key() {
        let mut m = MockSettings::default();
        assert_eq!(mock_config(&m), MockConfig::default());
        m.ttft_ms = 1.5;
        m.eos_after_tokens = Some(3);
        m.api = MockApi::LlamacppCompletions;
        m.faults.stall = 0.25;
        m.faults.empty = 0.125;
        m.seed = 9;
        let ours = serde_json::to_value(&m).unwrap();
        let theirs = serde_json::to_value(mock_config(&m)).unwrap();
        assert_eq!(ours, theirs);
        for api in [
            MockApi::OpenaiChat,
            MockApi::Openai,
            MockApi::Tgi,
            MockApi::Llamacpp,
            MockApi::LlamacppChat,
            MockApi::LlamacppCompletions,
            MockApi::Triton,
        ] {
            m.api = api;
            let ours = serde_json::to_value(api).unwrap();
            let theirs = serde_json::to_value(mock_config(&m).api).unwrap();
            assert_eq!(ours, theirs);
        }
    }
}
