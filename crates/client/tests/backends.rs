//! Every backend against the mock speaking its server's wire format: a whole
//! exchange (body, stream, parse, classification) per API, streamed and not,
//! and every injected fault landing in its outcome class.

use std::time::Duration;

use cicada_client::backend::ApiCodec;
use cicada_client::backend::Ask;
use cicada_client::clock::Clock;
use cicada_client::exchange::{Conduit, Exchange, perform};
use cicada_client::http::{Client, Headers};
use cicada_metrics::Outcome;
use cicada_mock::{FaultRates, MockApi, MockConfig, MockServer};
use cicada_request::{Prompt, ResolvedSampling, ServerFamily, TlsSettings, WireApi};

/// One way of talking to the mock: its API switch, our API and flavor, the route.
struct Case {
    mock_api: MockApi,
    api: WireApi,
    family: ServerFamily,
    path: &'static str,
    whole_path: &'static str,
    /// The server reports usage (else the tokens are the content events).
    counts: bool,
}

const CASES: [Case; 9] = [
    Case {
        mock_api: MockApi::OpenaiChat,
        api: WireApi::Chat,
        family: ServerFamily::Vllm,
        path: "/v1/chat/completions",
        whole_path: "/v1/chat/completions",
        counts: true,
    },
    Case {
        mock_api: MockApi::Openai,
        api: WireApi::Completions,
        family: ServerFamily::Sglang,
        path: "/v1/completions",
        whole_path: "/v1/completions",
        counts: true,
    },
    Case {
        mock_api: MockApi::LlamacppChat,
        api: WireApi::Chat,
        family: ServerFamily::LlamaCpp,
        path: "/v1/chat/completions",
        whole_path: "/v1/chat/completions",
        counts: true,
    },
    Case {
        mock_api: MockApi::LlamacppCompletions,
        api: WireApi::Completions,
        family: ServerFamily::LlamaCpp,
        path: "/v1/completions",
        whole_path: "/v1/completions",
        counts: true,
    },
    Case {
        mock_api: MockApi::Tgi,
        api: WireApi::Tgi,
        family: ServerFamily::Tgi,
        path: "/generate_stream",
        whole_path: "/generate",
        counts: true,
    },
    Case {
        mock_api: MockApi::Llamacpp,
        api: WireApi::LlamaCpp,
        family: ServerFamily::LlamaCpp,
        path: "/completion",
        whole_path: "/completion",
        counts: true,
    },
    Case {
        mock_api: MockApi::Triton,
        api: WireApi::Triton,
        family: ServerFamily::Triton,
        path: "/v2/models/cicada-mock/generate_stream",
        whole_path: "/v2/models/cicada-mock/generate",
        counts: false,
    },
    Case {
        mock_api: MockApi::OpenaiResponses,
        api: WireApi::Responses,
        family: ServerFamily::Openai,
        path: "/v1/responses",
        whole_path: "/v1/responses",
        counts: true,
    },
    Case {
        mock_api: MockApi::AnthropicMessages,
        api: WireApi::Messages,
        family: ServerFamily::Openai,
        path: "/v1/messages",
        whole_path: "/v1/messages",
        counts: true,
    },
];

fn sampling() -> ResolvedSampling {
    ResolvedSampling {
        temperature: Some(0.0),
        top_p: None,
        top_k: None,
        ignore_eos: true,
        min_tokens: None,
        extra_body: Default::default(),
    }
}

fn entry(words: usize, output: u32) -> Ask {
    Ask {
        prompt: Prompt::Text(vec!["w"; words].join(" ").into()),
        media: Default::default(),
        output_tokens: Some(output),
        structured: None,
    }
}

async fn mock(api: MockApi, tokens_per_event: u32, faults: FaultRates) -> MockServer {
    cicada_client::tls::install_crypto_provider();
    MockServer::start(
        MockConfig {
            ttft_ms: 5.0,
            itl_ms: 1.0,
            tokens_per_event,
            api,
            faults,
            ..MockConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

async fn exchange(case: &Case, base: &str, stream: bool, entry: &Ask) -> Exchange {
    exchange_with(case, base, stream, entry, sampling()).await
}

async fn exchange_with(
    case: &Case,
    base: &str,
    stream: bool,
    entry: &Ask,
    sampling: ResolvedSampling,
) -> Exchange {
    let codec = ApiCodec::new(
        case.api,
        case.family,
        "cicada-mock".into(),
        sampling,
        stream,
    );
    let http = Client::new(&TlsSettings::default(), true).unwrap();
    let headers = Headers::default();
    let clock = Clock::new(tokio::time::Instant::now());
    let conduit = Conduit {
        http: &http,
        headers: &headers,
        codec: &codec,
        clock: &clock,
        timeout: Duration::from_secs(10),
        keep_text: true,
        keep_output: false,
    };
    let path = if stream { case.path } else { case.whole_path };
    let endpoint = http.endpoint(&format!("{base}{path}")).unwrap();
    perform(
        conduit,
        &endpoint,
        "cicada-test-1",
        codec.shared_body(entry).parts(),
    )
    .await
}

#[tokio::test]
async fn every_backend_streams_and_counts_against_its_fake() {
    for case in &CASES {
        let m = mock(case.mock_api, 1, FaultRates::default()).await;
        let ex = exchange(case, &m.url(), true, &entry(6, 9)).await;
        let name = format!("{:?}/{:?}", case.api, case.family);
        assert_eq!(ex.outcome().0, Outcome::Ok, "{name}: {:?}", ex.outcome());
        // role-only, usage-only, finish-only and final events are not content
        assert_eq!(ex.events.len(), 9, "{name}");
        let words = ex.text.as_deref().unwrap().split_whitespace().count();
        assert_eq!(words, 9, "{name}");
        if case.counts {
            assert_eq!(ex.usage.completion_tokens, Some(9), "{name}");
        } else {
            assert_eq!(ex.usage.completion_tokens, None, "{name}");
        }
        if case.api != WireApi::Tgi || case.counts {
            // TGI reports the prompt length as `details.input_length`
            let p = ex.usage.prompt_tokens;
            assert!(p.is_none() || p == Some(6), "{name}: prompt {p:?}");
        }
        let stats = m.stats();
        assert_eq!(stats.requests, 1, "{name}");
        assert_eq!(stats.completed, 1, "{name}");
        let log = m.requests();
        assert_eq!(
            log[0].request_id.as_deref(),
            Some("cicada-test-1"),
            "{name}"
        );
        assert_eq!(log[0].output_tokens, 9, "{name}");
    }
}

#[tokio::test]
async fn an_early_end_of_sequence_is_a_normal_finish_for_every_backend() {
    cicada_client::tls::install_crypto_provider();
    let natural = ResolvedSampling {
        ignore_eos: false,
        ..sampling()
    };
    for case in &CASES {
        let m = MockServer::start(
            MockConfig {
                ttft_ms: 5.0,
                itl_ms: 1.0,
                api: case.mock_api,
                eos_after_tokens: Some(4),
                ..MockConfig::default()
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
        let name = format!("{:?}/{:?}", case.api, case.family);
        for stream in [true, false] {
            let ex = exchange_with(case, &m.url(), stream, &entry(5, 9), natural.clone()).await;
            assert_eq!(ex.outcome().0, Outcome::Ok, "{name}: {:?}", ex.outcome());
            let words = ex.text.as_deref().unwrap().split_whitespace().count();
            assert_eq!(words, 4, "{name} stream={stream}");
            if case.counts {
                assert_eq!(ex.usage.completion_tokens, Some(4), "{name}");
            }
        }
        // asking to ignore end-of-sequence gets the whole length where the API can ask
        let ex = exchange(case, &m.url(), true, &entry(5, 9)).await;
        let words = ex.text.as_deref().unwrap().split_whitespace().count();
        // TGI has no such field; no server reads it on Anthropic's route
        let can_ask = !matches!(case.api, WireApi::Tgi | WireApi::Messages);
        assert_eq!(words, if can_ask { 9 } else { 4 }, "{name}");
    }
}

#[tokio::test]
async fn every_backend_reads_whole_responses() {
    for case in &CASES {
        let m = mock(case.mock_api, 1, FaultRates::default()).await;
        let ex = exchange(case, &m.url(), false, &entry(4, 7)).await;
        let name = format!("{:?}/{:?}", case.api, case.family);
        assert_eq!(ex.outcome().0, Outcome::Ok, "{name}: {:?}", ex.outcome());
        assert_eq!(ex.events.len(), 1, "{name}");
        let text = ex.text.as_deref().unwrap();
        assert_eq!(text.split_whitespace().count(), 7, "{name}: {text:?}");
        assert!(!m.requests()[0].stream, "{name}");
    }
}

#[tokio::test]
async fn multi_token_steps_are_counted_per_event_where_the_server_says_so() {
    for case in &CASES {
        let m = mock(case.mock_api, 3, FaultRates::default()).await;
        let ex = exchange(case, &m.url(), true, &entry(3, 9)).await;
        let name = format!("{:?}/{:?}", case.api, case.family);
        assert_eq!(ex.outcome().0, Outcome::Ok, "{name}");
        let per_token = matches!(case.api, WireApi::Tgi | WireApi::LlamaCpp);
        // TGI and llama.cpp send an event per token even when a step makes
        // several; OpenAI and Triton send one event per step
        let expected_events = if per_token { 9 } else { 3 };
        assert_eq!(ex.events.len(), expected_events, "{name}");
        if ex.counted_per_event {
            assert_eq!(ex.events.tokens(), 9, "{name}: {:?}", ex.events);
        }
        // vLLM-style servers put running usage on every chunk when asked
        let continuous =
            matches!(case.family, ServerFamily::Vllm | ServerFamily::Sglang) || per_token;
        assert_eq!(ex.counted_per_event, continuous, "{name}");
    }
}

#[tokio::test]
async fn every_fault_lands_in_its_class_for_every_backend() {
    type Inject = fn(&mut FaultRates);
    let faults: [(Inject, Outcome); 6] = [
        (|f| f.error_event = 1.0, Outcome::ServerErrorEvent),
        (|f| f.malformed = 1.0, Outcome::BadPayload),
        (|f| f.truncate = 1.0, Outcome::StreamTruncated),
        (|f| f.reset = 1.0, Outcome::StreamTruncated),
        (|f| f.empty = 1.0, Outcome::Empty),
        (|f| f.http_500 = 1.0, Outcome::Http(500)),
    ];
    for case in &CASES {
        for (set, expected) in &faults {
            let mut rates = FaultRates::default();
            set(&mut rates);
            let m = mock(case.mock_api, 1, rates).await;
            let ex = exchange(case, &m.url(), true, &entry(3, 8)).await;
            assert_eq!(
                ex.outcome().0,
                *expected,
                "{:?}/{:?}: {:?}",
                case.api,
                case.family,
                ex.outcome()
            );
        }
    }
}
